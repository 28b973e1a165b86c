import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecRequest } from '../../src/executor/executor-protocol.ts';
import { dumpHash, integrity, pastMs } from '../helpers/history.ts';
import { historyPool, historyTarget, mustRun } from '../helpers/history-pool.ts';

// A restore in place renames a new file over the database. A handle another executor child kept
// from an earlier statement would go on reading (and checkpointing into) the old file, under the
// -wal and -shm names the new one uses: the pool must close it in every child before the
// restore, and afterwards every child must see the restored database. (Linux: which child has
// which file open is read from /proc.)
let dataDir: string;
let pool: ExecutorPool;
beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-restore-stale-'));
  pool = await historyPool(dataDir, { handleCacheSize: 4, checkpointBytes: 64 * 1024 });
});
afterAll(async () => {
  await pool.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const by = { who: 'operator:test', via: 'operator' as const };
let seq = 0;
const ok = (req: ExecRequest): Promise<any> => mustRun(pool, req);
const write = (db: DbTarget, sql: string, params: (string | number)[] = []) => ok({ op: 'write', db, sql, params, callKey: `k${++seq}` });
const read = (db: DbTarget, sql = 'SELECT count(*) FROM t') => ok({ op: 'query', db, sql, params: [], maxRows: 10 });

/** The children (pids) with `file` open, and whether any holds it after it was replaced (deleted). */
function holders(file: string): { pids: number[]; stale: boolean } {
  const pids: number[] = [];
  let stale = false;
  for (const pid of pool.pids) {
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      let target: string;
      try {
        target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      if (target === file) pids.push(pid);
      if (target === `${file} (deleted)`) stale = true;
    }
  }
  return { pids: [...new Set(pids)], stale };
}

describe('a restore in place with the database open in several executor children', () => {
  for (const older of [false, true]) {
    it(`closes it in every child first; afterwards every child reads the restored file (${older ? 'most of it changed since: the file renamed over' : 'a few pages changed since: one commit'})`, async () => {
      const db = historyTarget(dataDir, `stale/x${older ? '-older' : ''}`);
      await write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
      for (let i = 0; i < 10; i++) await write(db, 'INSERT INTO t(v) VALUES (?)', [`a${i}`]);
      const at = Date.now();
      pastMs(at);
      const atState = dumpHash(db.path, { withoutAudit: true });
      for (let i = 0; i < 10; i++) await write(db, 'INSERT INTO t(v) VALUES (?)', [`b${i}`]);
      if (older) {
        // Most of the file written since the moment: the rebuilt file is renamed over it.
        await write(
          db,
          "INSERT INTO t(v) SELECT printf('%.1000c', 'z') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) SELECT i FROM n)",
        );
        await ok({ op: 'snapshot', db, reason: 'manual' });
      }
      pastMs(Date.now());
      // One child ran x last; another database then keeps the other child busiest-lately, so a
      // statement of a third takes x's child, and x's next read goes to the other one: both
      // children end up with x open.
      await read(historyTarget(dataDir, 'stale/never-written'), 'SELECT 1');
      pastMs(Date.now());
      const other = historyTarget(dataDir, `stale/other${older ? '-older' : ''}`);
      await Promise.all([write(other, 'CREATE TABLE t(id INTEGER PRIMARY KEY)'), read(db)]);
      const open = holders(db.path);
      expect(open.pids, 'x should be open in both children before the restore').toHaveLength(2);
      const inode = fs.statSync(db.path).ino;

      const out = await ok({ op: 'restore', db, at, by, timeoutMs: 60_000 });
      expect(out.undoId).toMatch(/^u/);
      // From an older generation the file was replaced (the rename, not the backup API); within
      // the generation it was written by one commit that every child sees. No child kept the old one.
      if (older) expect(fs.statSync(db.path).ino).not.toBe(inode);
      else expect(fs.statSync(db.path).ino).toBe(inode);
      expect(holders(db.path).stale).toBe(false);
      // Every child reads the restored database, and writes go on with their history.
      const counts = await Promise.all([read(db), read(db), write(other, 'INSERT INTO t DEFAULT VALUES'), read(db)]);
      for (const c of [counts[0], counts[1], counts[3]]) expect(c.rows[0][0]).toBe(10);
      await write(db, 'INSERT INTO t(v) VALUES (?)', ['after']);
      expect(holders(db.path).stale).toBe(false);
      expect(integrity(db.path)).toBe('ok');
      const later = Date.now();
      pastMs(later);
      const fork = historyTarget(dataDir, `stale/fork${older ? '-older' : ''}`);
      await ok({ op: 'restoreInto', db: fork, source: db.id, from: db, at: later, by, timeoutMs: 60_000 });
      expect(dumpHash(fork.path, { withoutAudit: true })).toBe(dumpHash(db.path, { withoutAudit: true }));
      // And the undo goes back through the same path.
      await ok({ op: 'restore', db, undo: out.undoId, by, timeoutMs: 60_000 });
      expect(holders(db.path).stale).toBe(false);
      expect((await read(db)).rows[0][0]).toBe(older ? 20 + 400 : 20);
      expect(atState).not.toBe(dumpHash(db.path, { withoutAudit: true }));
    }, 60_000);
  }

  it('copies through SQLite instead when a connection outside agentdb has the file open', async () => {
    const db = historyTarget(dataDir, 'stale/outside');
    await write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    for (let i = 0; i < 5; i++) await write(db, 'INSERT INTO t(v) VALUES (?)', [`a${i}`]);
    const at = Date.now();
    pastMs(at);
    for (let i = 0; i < 5; i++) await write(db, 'INSERT INTO t(v) VALUES (?)', [`b${i}`]);
    // A program outside agentdb (the sqlite3 shell, a backup tool) holding it open: renaming a
    // file over it would leave that program on the old file beside the new one's -wal.
    const outside = new Database(db.path, { fileMustExist: true });
    try {
      expect(outside.prepare('SELECT count(*) FROM t').pluck().get()).toBe(10);
      const inode = fs.statSync(db.path).ino;
      const out = await ok({ op: 'restore', db, at, by, timeoutMs: 60_000 });
      expect(fs.statSync(db.path).ino).toBe(inode);
      // The outside connection sees the restore as a commit like any other.
      expect(outside.prepare('SELECT count(*) FROM t').pluck().get()).toBe(5);
      expect((await read(db)).rows[0][0]).toBe(5);
      await ok({ op: 'restore', db, undo: out.undoId, by, timeoutMs: 60_000 });
      expect(outside.prepare('SELECT count(*) FROM t').pluck().get()).toBe(10);
    } finally {
      outside.close();
    }
    expect(integrity(db.path)).toBe('ok');
  }, 60_000);

  it('runs the statements sent before a restore first and those sent after it afterwards, sent all at once', async () => {
    const db = historyTarget(dataDir, 'stale/order');
    await write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    await write(db, 'INSERT INTO t(v) VALUES (?)', ['first']);
    const at = Date.now();
    pastMs(at);
    // One tick: the pool holds the restore back until every child closed the database, and
    // must neither let the write behind it overtake it nor send it before the ones ahead.
    const [, , restored, after] = await Promise.all([
      write(db, 'INSERT INTO t(v) VALUES (?)', ['before 1']),
      write(db, 'INSERT INTO t(v) VALUES (?)', ['before 2']),
      ok({ op: 'restore', db, at, by, timeoutMs: 60_000 }),
      write(db, 'INSERT INTO t(v) VALUES (?)', ['after']),
    ]);
    expect(after).toBeDefined();
    expect((await read(db, 'SELECT v FROM t ORDER BY id')).rows.map((r: unknown[]) => r[0])).toEqual(['first', 'after']);
    await ok({ op: 'restore', db, undo: restored.undoId, by, timeoutMs: 60_000 });
    expect((await read(db, 'SELECT v FROM t ORDER BY id')).rows.map((r: unknown[]) => r[0])).toEqual(['first', 'before 1', 'before 2']);
  }, 60_000);
});
