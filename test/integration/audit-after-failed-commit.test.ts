// A decision's audit whose transaction failed after creating the audit table (a full disk) must
// not leave its handle believing the table exists: every later audit on that handle answered
// SQL_ERROR "no such table: _agentdb_audit" (fault review 19: an approval decided on a full
// tmpfs, then every decision of that database after room came back went unaudited).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, expect, test } from 'vitest';
import { AUDIT_TABLE, recordAudit, type AuditEntry } from '../../src/sqlite/sqlite-audit.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const entry = (approvalId: string): AuditEntry => ({
  approvalId,
  callId: `acme.scout.${approvalId}`,
  tool: 'DATA_WRITE_SQL',
  tier: 'write',
  statement: 'UPDATE t SET v = ? WHERE id = 1',
  params: ['x'.repeat(3000)],
  requester: 'scout',
  decision: 'approved',
  decidedBy: 'ada',
  decidedVia: 'key',
  decidedAt: Date.now(),
  reason: 'r'.repeat(3000),
  at: Date.now(),
});

test('an audit whose transaction rolled back creates its table again on the same handle', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'audit-rollback-'));
  dirs.push(dir);
  const db = new Database(path.join(dir, 'a.sqlite'));
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  // Room for the audit table's root page and nothing more: its big row fails the transaction
  // after the table was created in it (as a full disk fails it), and it all rolls back.
  const pages = db.pragma('page_count', { simple: true }) as number;
  db.pragma(`max_page_count = ${pages + 1}`);
  expect(() => recordAudit(db, entry('ap_first'))).toThrow(/full/i);
  expect(db.prepare(`SELECT count(*) AS n FROM sqlite_schema WHERE name = '${AUDIT_TABLE}'`).get()).toEqual({ n: 0 });
  // Room again: the next decision's audit is written.
  db.pragma('max_page_count = 1073741823');
  recordAudit(db, entry('ap_second'));
  expect(db.prepare(`SELECT approval_id FROM ${AUDIT_TABLE}`).pluck().all()).toEqual(['ap_second']);
  db.close();
});
