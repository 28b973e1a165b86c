import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import {
  CALL_PRUNE_EVERY_MS,
  CALL_RECORD_RETENTION_MS,
  CALLS_TABLE,
  effectDigest,
  ensureCallsTable,
  MAX_RECORD_BYTES,
  PRUNE_EVERY_MS,
} from '../../src/sqlite/call-record.ts';
import BetterSqlite3 from 'better-sqlite3';
import { toOpError, write } from '../../src/sqlite/sqlite-ops.ts';
import { AgentDbError } from '../../src/errors.ts';
import { ACTIVITY_RETENTION_MS, ACTIVITY_TABLE } from '../../src/sqlite/sqlite-activity.ts';

// Review 16b: exactly-once records kept each write's whole result for a week, inside the
// database file and its plan's size limit, where no agent sees or deletes them. 116 writes
// returning 900 KB each filled a shared 100 MB database for every other writer.

const BIG_RETURNING = "INSERT INTO scratch(a) VALUES (1) RETURNING printf('%.*c', 900000, 'x') AS pad";

let dataDir: string;
let handles: HandleCache;
let n = 0;

beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-records-'));
  handles = new HandleCache({ size: 4 });
});
afterEach(() => handles.closeAll());
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

/** A plan of 8 MB: whole records filled it in 9 writes. */
const SMALL_PLAN = { ...PLAN_LIMITS.pro, maxTables: PLAN_LIMITS.pro.maxTables, maxBytes: 8 * 1024 * 1024 };

function target(): DbTarget {
  const agent = `a${++n}`;
  return { id: `ws/${agent}`, path: databasePath(dataDir, 'ws', agent, 0), shard: 0, limits: SMALL_PLAN };
}

/** A write as the executor runs it: an agent error is an outcome code, not a throw. */
function tryWrite(db: Database.Database, t: DbTarget, sql: string, key: string, params: (string | number)[] = []) {
  try {
    return { ok: true as const, result: write(db, sql, params, key, t.limits) };
  } catch (err) {
    if (err instanceof AgentDbError || (err as { code?: string }).code?.startsWith('SQLITE_'))
      return { ok: false as const, code: toOpError(err, () => 'LIMIT_EXCEEDED').code };
    throw err;
  }
}

describe("a write's exactly-once record", () => {
  it('keeps at most 16 KB of RETURNING rows: 116 writes of 900 KB each leave a small plan room for others', () => {
    const t = target();
    const db = handles.open(t, 'write');
    expect(tryWrite(db, t, 'CREATE TABLE scratch (a INTEGER)', 'k-create').ok).toBe(true);
    expect(tryWrite(db, t, 'CREATE TABLE leads (email TEXT)', 'k-leads').ok).toBe(true);
    for (let i = 0; i < 116; i++) {
      const w = tryWrite(db, t, BIG_RETURNING, `k-big-${i}`);
      expect(w).toMatchObject({ ok: true, result: { changes: 1, rows: [[expect.any(String)]] } });
      // The caller's own answer is whole.
      expect((w as { result: { rows: string[][] } }).result.rows[0]![0]!.length).toBe(900000);
    }
    expect(tryWrite(db, t, 'DELETE FROM scratch', 'k-delete')).toMatchObject({ ok: true, result: { changes: 116 } });
    // Another writer still writes.
    expect(tryWrite(db, t, 'INSERT INTO leads VALUES (?)', 'k-lead', ['new@x'])).toMatchObject({ ok: true, result: { changes: 1 } });
    const biggest = db.prepare(`SELECT max(length(result)) FROM ${CALLS_TABLE}`).pluck().get() as number;
    expect(biggest).toBeLessThanOrEqual(MAX_RECORD_BYTES);
    const pages = db.pragma('page_count', { simple: true }) as number;
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    expect(pages * pageSize).toBeLessThan(4 * 1024 * 1024);
  });

  it('replays a big RETURNING write with the rows its record kept, saying they were cut', () => {
    const t = target();
    const db = handles.open(t, 'write');
    expect(tryWrite(db, t, 'CREATE TABLE scratch (a INTEGER)', 'k-create').ok).toBe(true);
    // 200 rows of ~1 KB: about 200 KB answered, 15 or so kept.
    const sql =
      "INSERT INTO scratch(a) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 200) SELECT i FROM n RETURNING a, printf('%.*c', 1000, 'y') AS pad";
    const first = write(db, sql, [], 'k-many', t.limits);
    expect(first).toMatchObject({ changes: 200, columns: ['a', 'pad'], truncated: false });
    expect(first.rows).toHaveLength(200);
    expect(first).not.toHaveProperty('note');

    const again = write(db, sql, [], 'k-many', t.limits);
    expect(again).toMatchObject({ replayed: true, changes: 200, lastInsertRowid: first.lastInsertRowid, columns: ['a', 'pad'], truncated: true });
    const kept = again.rows.length;
    expect(kept).toBeGreaterThan(5);
    expect(kept).toBeLessThan(20);
    expect(again.rows).toEqual(first.rows.slice(0, kept));
    expect((again as { note?: string }).note).toBe(
      `answered from this call's exactly-once record, which keeps 16 KB of RETURNING rows: ${kept} of the 200 rows the write returned when it ran`,
    );
    expect(db.prepare(`SELECT count(*) FROM scratch`).pluck().get()).toBe(200);

    // A single row past the limit: the record keeps none of it, and says so.
    const one = write(db, BIG_RETURNING, [], 'k-one', t.limits);
    expect(write(db, BIG_RETURNING, [], 'k-one', t.limits)).toEqual({
      changes: 1,
      lastInsertRowid: one.lastInsertRowid,
      columns: ['pad'],
      rows: [],
      truncated: true,
      note: "answered from this call's exactly-once record, which keeps 16 KB of RETURNING rows: 0 of the 1 rows the write returned when it ran",
      replayed: true,
    });
  });

  it('replays a write with a small result exactly as it answered', () => {
    const t = target();
    const db = handles.open(t, 'write');
    expect(tryWrite(db, t, 'CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT)', 'k-create').ok).toBe(true);
    const sql = 'INSERT INTO leads (email) VALUES (?), (?) RETURNING id, email';
    const first = write(db, sql, ['a@x', 'b@x'], 'k-small', t.limits);
    expect(first).toEqual({
      changes: 2,
      lastInsertRowid: 2,
      columns: ['id', 'email'],
      rows: [
        [1, 'a@x'],
        [2, 'b@x'],
      ],
      truncated: false,
    });
    expect(write(db, sql, ['a@x', 'b@x'], 'k-small', t.limits)).toEqual({ ...first, replayed: true });
    const plain = write(db, 'UPDATE leads SET email = upper(email)', [], 'k-plain', t.limits);
    expect(write(db, 'UPDATE leads SET email = upper(email)', [], 'k-plain', t.limits)).toEqual({ ...plain, replayed: true });
  });

  it('prunes records past their retention as writes go on, not only when a handle opens', () => {
    const t = target();
    const db = handles.open(t, 'write');
    expect(tryWrite(db, t, 'CREATE TABLE leads (email TEXT)', 'k-create').ok).toBe(true);
    const now = Date.now();
    // Records of a week ago and more, as a long-open handle would have left them.
    const old = db.prepare(`INSERT INTO ${CALLS_TABLE} (call_id, result, at, digest) VALUES (?, '{}', ?, NULL)`);
    for (let i = 0; i < 50; i++) old.run(`old-${i}`, now - CALL_RECORD_RETENTION_MS - 1000 - i);
    const count = () => db.prepare(`SELECT count(*) FROM ${CALLS_TABLE}`).pluck().get() as number;
    expect(count()).toBe(51);
    // Within the cadence of the last prune (this handle's first write) nothing is read again.
    ensureCallsTable(db, now + 1000);
    expect(count()).toBe(51);
    ensureCallsTable(db, now + PRUNE_EVERY_MS + 1000);
    expect(count()).toBe(51);
    // Records are read whole to be pruned (no index on `at`): once a day, by the process, not the handle.
    handles.closeAll();
    const reopened = handles.open(t, 'write');
    const counted = () => reopened.prepare(`SELECT count(*) FROM ${CALLS_TABLE}`).pluck().get();
    ensureCallsTable(reopened, now + 2 * PRUNE_EVERY_MS);
    expect(counted()).toBe(51);
    ensureCallsTable(reopened, now + CALL_PRUNE_EVERY_MS + 1000);
    expect(counted()).toBe(1);
    const left = reopened;
    expect(left.prepare(`SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?`).pluck().all(CALLS_TABLE)).toEqual([]);
  });

  it('drops the index on `at` from a file written before, which replays its records as they were', () => {
    const t = target();
    fs.mkdirSync(path.dirname(t.path), { recursive: true });
    // The calls table as the code before made it, with a write it recorded.
    const sql = 'INSERT INTO leads (email) VALUES (?)';
    const before = new BetterSqlite3(t.path);
    before.pragma('journal_mode = WAL');
    before.exec(`CREATE TABLE ${CALLS_TABLE} (call_id TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL, digest TEXT) WITHOUT ROWID;
      CREATE INDEX ${CALLS_TABLE}_at ON ${CALLS_TABLE} (at);
      CREATE TABLE leads (email TEXT); INSERT INTO leads VALUES ('a@x');`);
    before
      .prepare(`INSERT INTO ${CALLS_TABLE} VALUES (?, ?, ?, ?)`)
      .run('k-old', JSON.stringify({ changes: 1, lastInsertRowid: 1 }), Date.now(), effectDigest(['write', sql, ['a@x']]));
    before.close();
    const db = handles.open(t, 'write');
    expect(write(db, sql, ['a@x'], 'k-old', t.limits)).toEqual({ changes: 1, lastInsertRowid: 1, columns: [], rows: [], truncated: false, replayed: true });
    const indexes = () => db.prepare(`SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?`).pluck().all(CALLS_TABLE);
    expect(indexes()).not.toContain(`${CALLS_TABLE}_at`);
    expect(write(db, sql, ['b@x'], 'k-new', t.limits)).toMatchObject({ changes: 1, lastInsertRowid: 2 });
    expect(db.prepare('SELECT email FROM leads ORDER BY rowid').pluck().all()).toEqual(['a@x', 'b@x']);
    expect(db.prepare(`SELECT call_id FROM ${CALLS_TABLE} ORDER BY call_id`).pluck().all()).toEqual(['k-new', 'k-old']);
  });
  it('prunes activity rows past their retention, oldest first, and keeps every newer one', () => {
    const t = target();
    const db = handles.open(t, 'write');
    expect(tryWrite(db, t, 'CREATE TABLE leads (email TEXT)', 'k-create').ok).toBe(true);
    const now = Date.now();
    const add = db.prepare(`INSERT INTO ${ACTIVITY_TABLE} (seq, kind, at) VALUES ((SELECT coalesce(max(seq), 0) + 1 FROM ${ACTIVITY_TABLE}), 'call', ?)`);
    // 40 rows past retention, then 10 within it, as a database's writes leave them (numbered in time order).
    db.prepare(`DELETE FROM ${ACTIVITY_TABLE}`).run();
    for (let i = 40; i > 0; i--) add.run(now - ACTIVITY_RETENTION_MS - i * 1000);
    for (let i = 10; i > 0; i--) add.run(now - i * 1000);
    const ats = () => db.prepare(`SELECT at FROM ${ACTIVITY_TABLE} ORDER BY seq`).pluck().all() as number[];
    ensureCallsTable(db, now + PRUNE_EVERY_MS + 1000);
    // The prune's own row (it deleted rows) comes last.
    const left = ats();
    expect(left.slice(0, 10)).toEqual(Array.from({ length: 10 }, (_, i) => now - (10 - i) * 1000));
    expect(left.length).toBe(11);
    expect(left.every((at) => at >= now - ACTIVITY_RETENTION_MS)).toBe(true);
    // All of them past retention: every one goes.
    ensureCallsTable(db, now + ACTIVITY_RETENTION_MS + 2 * PRUNE_EVERY_MS + 10_000);
    expect(ats().filter((at) => at < now + 2 * PRUNE_EVERY_MS)).toEqual([]);
  });
});
