import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';

// Session 32, F9 (F8's leftover): a connection whose WAL was deleted under it (a program that
// ignores the child's locks checkpointed and deleted it at its close) went on committing into the
// deleted file: writes answered ok, seen by no other process, in history only, and lost from the
// database when the child exited (its handle could never close). Now the child copies what that
// connection sees over the file before the next write, and opens the database afresh.

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-wal-put-back-'));
let pool: ExecutorPool;
let db: DbTarget;
let seq = 0;
const insert = (v: string) => pool.run({ op: 'write', db, sql: 'INSERT INTO t (v) VALUES (?)', params: [v], callKey: `wp/a.k${++seq}` });

beforeAll(async () => {
  pool = await oneChildPool(dataDir, { checkpointBytes: 64 * 1024 * 1024 });
  db = historyTarget(dataDir, 'wp/a');
  expect((await pool.run({ op: 'write', db, sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)', params: [], callKey: 'wp/a.k0' })).ok).toBe(true);
});

afterAll(async () => {
  await pool?.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/** The rows another process's connection sees. */
function seen(): string[] {
  const other = new Database(db.path, { fileMustExist: true });
  try {
    return (other.prepare('SELECT v FROM t ORDER BY id').all() as { v: string }[]).map((r) => r.v);
  } finally {
    other.close();
  }
}

it('puts the writes answered ok into the deleted WAL back in the database', async () => {
  expect((await insert('before')).ok).toBe(true);
  // What a connection elsewhere that took itself for the last does at its close.
  fs.rmSync(`${db.path}-wal`);
  fs.rmSync(`${db.path}-shm`);
  const into = await insert('into the deleted WAL');
  expect(into, JSON.stringify(into)).toMatchObject({ ok: true });
  const after = await insert('after');
  expect(after, JSON.stringify(after)).toMatchObject({ ok: true });
  expect(seen()).toEqual(['before', 'into the deleted WAL', 'after']);
  // And after the child's handle closes.
  expect((await pool.run({ op: 'evict', shards: [db.shard] })).ok).toBe(true);
  expect(seen()).toEqual(['before', 'into the deleted WAL', 'after']);
  const read = await pool.run({ op: 'query', db, sql: 'SELECT count(*) FROM t', params: [], maxRows: 1 });
  expect(read).toMatchObject({ ok: true, result: { rows: [[3]] } });
});
