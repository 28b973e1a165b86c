/**
 * An approved insert whose values a DEFAULT makes (session 34, R8). The digest leaves out a value
 * that a volatile DEFAULT (`CURRENT_TIMESTAMP`, `randomblob()`) or SQLite's rowid makes, since
 * nobody could be shown it exactly; it did not bind which DEFAULT made it. So a table made again
 * between the approval and the run, same columns, with `DEFAULT (strftime('any text', 'now'))`,
 * had the approved insert write that text where the person was shown a time.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hardenConnection } from '../../src/guard/engine-check.ts';
import { ensureCallsTable } from '../../src/sqlite/call-record.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';
import { write } from '../../src/sqlite/sqlite-ops.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';

const LIMITS = { ...PLAN_LIMITS.pro, maxTables: 50, maxBytes: 100 * 1024 * 1024 };
const FX = { maxRows: 100, maxBytes: 100_000 };

describe('an approved insert is bound to the DEFAULTs that make its left-out values', () => {
  let dir: string;
  let db: Database.Database;
  let callNo = 0;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-effect-defaults-'));
    db = new Database(path.join(dir, 'db.sqlite'));
    hardenConnection(db);
    db.pragma('journal_mode = WAL');
    ensureCallsTable(db);
  });
  afterEach(() => {
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Another caller's writes, which need no approval (a member, or an agent without `approval: "write"`). */
  const meanwhile = (...sqls: string[]) => {
    for (const sql of sqls) write(db, sql, [], `other-${callNo++}`, LIMITS);
  };
  const approvedRun = (sql: string, digest: string) => {
    try {
      return write(db, sql, [], `approved-${callNo++}`, LIMITS, undefined, undefined, { digest, limits: FX });
    } catch (err) {
      return err as { code?: string };
    }
  };

  it('asks again when the table is made again with a DEFAULT or a key that makes something else', () => {
    meanwhile('CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, at TEXT DEFAULT CURRENT_TIMESTAMP)');
    const insert = "INSERT INTO t (a) VALUES ('x')";
    const fx = previewEffect(db, insert, [], LIMITS, FX);
    expect(fx.rows[0]!.after).toMatchObject({ a: 'x', at: expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/) });
    meanwhile(
      'ALTER TABLE t RENAME TO t_before',
      "CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, at TEXT DEFAULT (strftime('not what you approved', 'now')))",
    );
    expect(approvedRun(insert, fx.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
    expect(db.prepare('SELECT count(*) FROM t').pluck().get()).toBe(0);

    // The rowid SQLite assigns is left out too: a key the table makes by a DEFAULT instead is not that.
    meanwhile('CREATE TABLE k (id INTEGER PRIMARY KEY, a TEXT)');
    const keyed = "INSERT INTO k (a) VALUES ('x')";
    const seen = previewEffect(db, keyed, [], LIMITS, FX);
    meanwhile('ALTER TABLE k RENAME TO k_before', 'CREATE TABLE k (id TEXT PRIMARY KEY DEFAULT (hex(randomblob(2))), a TEXT) WITHOUT ROWID');
    expect(approvedRun(keyed, seen.digest)).toMatchObject({ code: 'APPROVAL_STALE' });
    expect(db.prepare('SELECT count(*) FROM k').pluck().get()).toBe(0);
  });

  it('runs when the table is made again with the same DEFAULT', () => {
    meanwhile('CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, at TEXT DEFAULT CURRENT_TIMESTAMP, tok BLOB DEFAULT (randomblob(4)))');
    const insert = "INSERT INTO t (a) VALUES ('x')";
    const fx = previewEffect(db, insert, [], LIMITS, FX);
    meanwhile(
      'ALTER TABLE t RENAME TO t_before',
      'CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, at TEXT DEFAULT CURRENT_TIMESTAMP, tok BLOB DEFAULT (randomblob(4)))',
    );
    expect(approvedRun(insert, fx.digest)).toMatchObject({ changes: 1 });
    expect(db.prepare('SELECT a FROM t').pluck().all()).toEqual(['x']);
  });
});
