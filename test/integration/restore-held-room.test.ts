import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { localSource } from '../../src/history/history-files.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { pastMs } from '../helpers/history.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';
import { fillDisk, mountTmpfs, unmountTmpfs } from '../helpers/tmpfs.ts';

// Session 36, F15. A restore in place of a database another process holds open goes in through
// SQLite's backup API (`throughSqlite`), as one commit the other connections see.
// (1, F14's leftover) It first prepared the generation a rename would begin (a copy into history
// of every page the rebuild wrote: here all of them), then discarded it: its room at that moment
// was the rebuilt file twice beside the live WAL, of which the backup path itself needs none when
// the WAL already has the room (it restarts it). With room for the rebuilt file and half as much
// again, main answered STORAGE_FULL a restore that fits.
// (2) A connection opened and not used yet (no -wal, -shm or lock of its own: SQLite opens those
// at the first read) was not seen: the rebuilt file was renamed over the live one, and that
// connection went on reading the old file's inode, answered ok; its writes went there too.

const mnt = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-restore-held-'));
const refused = mountTmpfs(mnt, '300m');
if (refused) {
  fs.rmSync(mnt, { recursive: true, force: true });
  console.warn(`restore-held-room.test.ts: skipped, this machine refused to mount a tmpfs (${refused}); it needs root and mount(2)`);
}
const by = { who: 'operator:held-test', via: 'operator' as const };
/** Two rows a page: ~2,500 pages (10 MB), under the 4,062 frames of the -shm's first 32 KiB. */
const ROWS = 5_000;

describe.runIf(!refused)('a restore in place of a database another process holds open', () => {
  let pool: ExecutorPool;
  let seq = 0;
  const outsides: Database.Database[] = [];
  const filler = path.join(mnt, 'filler');
  const write = (db: DbTarget, sql: string) => pool.run({ op: 'write', db, sql, params: [], callKey: `${db.id}.k${++seq}` });
  const ok = (out: ExecOutcome) => expect(out.ok, JSON.stringify(out)).toBe(true);
  const CHANGED = "SELECT count(*) AS n FROM t WHERE v LIKE 'changed%'";
  const open = (db: DbTarget) => {
    const conn = new Database(db.path, { fileMustExist: true });
    outsides.push(conn);
    return conn;
  };

  beforeAll(async () => {
    pool = await oneChildPool(mnt);
  });
  afterAll(async () => {
    for (const conn of outsides) conn.close();
    await pool?.stop();
    if (!refused) {
      unmountTmpfs(mnt);
      fs.rmSync(mnt, { recursive: true, force: true });
    }
  });

  /** A database of ROWS rows captured, the moment after them, and `outside`'s connection, then every row changed in one commit. */
  async function changedSince(name: string, outside: (db: DbTarget) => Database.Database) {
    const db = historyTarget(mnt, name);
    ok(await write(db, 'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)'));
    for (let i = 0; i < ROWS; i += 500)
      ok(await write(db, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 500) INSERT INTO t (v) SELECT printf('%01800d', x) FROM c`));
    ok(await pool.run({ op: 'capture', db }));
    const moment = Date.now();
    pastMs(moment);
    const conn = outside(db);
    // In one commit: the live WAL grows to the file's size.
    ok(await write(db, `UPDATE t SET v = printf('changed %01800d', id)`));
    ok(await pool.run({ op: 'capture', db }));
    return { db, moment, conn };
  }

  /** After every agentdb connection is closed: the file holds the restore, whole, and nothing half-made is left. */
  async function wholeAfterReopen(db: DbTarget) {
    ok(await pool.run({ op: 'evict', shards: [0] }));
    const fresh = open(db);
    expect(fresh.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: ROWS });
    expect(fresh.prepare(CHANGED).get()).toEqual({ n: 0 });
    expect(fresh.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(fs.readdirSync(path.dirname(db.path)).filter((n) => n.includes('.tmp'))).toEqual([]);
    expect(fs.readdirSync(localSource(mnt, db.id).generationsDir).filter((n) => n.includes('.tmp'))).toEqual([]);
  }

  it('goes in through the backup API without a copy into history first, on a disk with room for it', async () => {
    const { db, moment, conn } = await changedSince('hr/a', (d) => {
      const c = open(d);
      // It has read: it holds the -shm's lock, and the restore takes the backup API's way.
      expect(c.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: ROWS });
      return c;
    });
    const file = fs.statSync(db.path).size;
    expect(fs.statSync(`${db.path}-wal`).size).toBeGreaterThan(file * 0.9);
    const room = Math.round(file * 1.5);
    const fill = fillDisk(filler);
    fs.ftruncateSync(fill.fd, Math.max(0, fill.size - room));
    let out: ExecOutcome;
    try {
      out = await pool.run({ op: 'restore', db, at: moment, by, timeoutMs: 120_000 });
    } finally {
      fs.closeSync(fill.fd);
      fs.rmSync(filler);
    }
    // Main: STORAGE_FULL "ENOSPC: no space left on device, write" (the generation it prepared).
    expect(out.ok, JSON.stringify(out)).toBe(true);
    expect(conn.prepare(CHANGED).get()).toEqual({ n: 0 });
    await wholeAfterReopen(db);
  }, 300_000);

  it('sees a connection opened and not used yet: it reads the restored database, and its write is in the file', async () => {
    const { db, moment, conn } = await changedSince('hr/b', open);
    ok(await pool.run({ op: 'restore', db, at: moment, by, timeoutMs: 120_000 }));
    // Main: the file renamed over, this connection read the old inode (every row changed).
    expect(conn.prepare(CHANGED).get()).toEqual({ n: 0 });
    conn.prepare("INSERT INTO t (v) VALUES ('outside')").run();
    ok(await pool.run({ op: 'evict', shards: [0] }));
    const fresh = open(db);
    expect(fresh.prepare("SELECT count(*) AS n FROM t WHERE v = 'outside'").get()).toEqual({ n: 1 });
    expect(fresh.prepare(CHANGED).get()).toEqual({ n: 0 });
    expect(fresh.pragma('integrity_check', { simple: true })).toBe('ok');
  }, 300_000);
});
