import Database from 'better-sqlite3';
import { expect } from 'vitest';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';

// A write and a drop that committed, run again (their worker SIGKILLed before the answer, the
// job taken over) on a disk full to the last byte: each must answer what it did from its
// exactly-once record, and only a new write STORAGE_FULL.

/** The insert and the drop run twice, their call keys under `keyPrefix`. */
export function replayedCalls(keyPrefix: string) {
  return {
    insert: { op: 'write' as const, sql: 'INSERT INTO t VALUES (?)', params: [7], callKey: `${keyPrefix}.k-once` },
    drop: { op: 'drop' as const, table: 'gone', callKey: `${keyPrefix}.k-drop` },
  };
}

/** Makes `t` and `gone` on `db` and runs the insert and the drop once; both must answer ok. Answers the insert's outcome. */
export async function runOnce(pool: ExecutorPool, db: DbTarget, keyPrefix: string): Promise<ExecOutcome> {
  const { insert, drop } = replayedCalls(keyPrefix);
  for (const [i, sql] of ['CREATE TABLE t(a)', 'CREATE TABLE gone(a)'].entries())
    expect((await pool.run({ op: 'write', db, sql, params: [], callKey: `${keyPrefix}.k${i}` })).ok).toBe(true);
  const first = await pool.run({ ...insert, db });
  const dropped = await pool.run({ ...drop, db });
  expect(first.ok && dropped.ok, JSON.stringify([first, dropped])).toBe(true);
  return first;
}

/** Runs the insert and the drop again: each answered from its record as `first` was; a new write STORAGE_FULL. */
export async function expectReplayed(pool: ExecutorPool, db: DbTarget, keyPrefix: string, first: ExecOutcome): Promise<void> {
  const { insert, drop } = replayedCalls(keyPrefix);
  const again = await pool.run({ ...insert, db });
  expect(again, JSON.stringify(again)).toMatchObject({ ok: true, replayed: true, result: { changes: 1 } });
  expect((again as { result: unknown }).result).toMatchObject({ lastInsertRowid: (first as { result: { lastInsertRowid: number } }).result.lastInsertRowid });
  const dropAgain = await pool.run({ ...drop, db });
  expect(dropAgain, JSON.stringify(dropAgain)).toMatchObject({ ok: true, replayed: true });
  const fresh = await pool.run({ ...insert, db, callKey: `${keyPrefix}.k-new` });
  expect(fresh, JSON.stringify(fresh)).toMatchObject({ ok: false, error: { code: 'STORAGE_FULL' } });
}

/** With every handle closed: the row inserted once, the dropped table gone. */
export async function expectWroteOnce(pool: ExecutorPool, db: DbTarget): Promise<void> {
  expect((await pool.run({ op: 'evict', shards: [0] })).ok).toBe(true);
  const rows = new Database(db.path, { readonly: true });
  expect(rows.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 1 });
  expect(rows.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE name = 'gone'").get()).toEqual({ n: 0 });
  rows.close();
}
