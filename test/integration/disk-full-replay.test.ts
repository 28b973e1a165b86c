import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { removeTmpfsFolder, tmpfsFolder } from '../helpers/tmpfs.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';

// Session 31, F8's fault ledger (runs 2 and 3): a write that had committed was answered
// STORAGE_FULL "nothing was written" when its call ran again (its worker SIGKILLed before the
// answer, the job taken over) on a full disk: the database's handles had closed, and opening it
// again needs room for its -shm and -wal, so the write failed before it could find its own
// exactly-once record. The caller was told the write failed; its row was there. Run again, a
// write or drop that committed answers what it did, full disk or not; one that did not is still
// STORAGE_FULL.

const { mnt, refused } = tmpfsFolder('agentdb-replay-full-', '8m', 'disk-full-replay.test.ts');

describe.runIf(!refused)('a write or drop run again on a full disk, after it committed', () => {
  let pool: ExecutorPool;
  let db: DbTarget;
  const filler = path.join(mnt, 'filler');
  const insert = { op: 'write' as const, sql: 'INSERT INTO t VALUES (?)', params: [7], callKey: 'full/a.k-once' };
  const drop = { op: 'drop' as const, table: 'gone', callKey: 'full/a.k-drop' };
  let first: ExecOutcome;
  let dropped: ExecOutcome;

  beforeAll(async () => {
    pool = await oneChildPool(mnt);
    db = historyTarget(mnt, 'full/a');
    for (const [i, sql] of ['CREATE TABLE t(a)', 'CREATE TABLE gone(a)'].entries())
      expect((await pool.run({ op: 'write', db, sql, params: [], callKey: `full/a.k${i}` })).ok).toBe(true);
    first = await pool.run({ ...insert, db });
    dropped = await pool.run({ ...drop, db });
    expect(first.ok && dropped.ok, JSON.stringify([first, dropped])).toBe(true);
    // Every handle closed (its child gone with its worker), then the disk fills to the last byte.
    expect((await pool.run({ op: 'evict', shards: [0] })).ok).toBe(true);
    try {
      execFileSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=64k'], { stdio: 'pipe' });
    } catch {
      // dd stops with ENOSPC: that is the point.
    }
    expect(fs.statfsSync(mnt).bavail).toBe(0);
  });

  afterAll(async () => {
    await pool?.stop();
    removeTmpfsFolder(mnt, refused);
  });

  it('answers the write and the drop from their records, and a new write STORAGE_FULL', async () => {
    const again = await pool.run({ ...insert, db });
    expect(again, JSON.stringify(again)).toMatchObject({ ok: true, replayed: true, result: { changes: 1 } });
    expect((again as { result: unknown }).result).toMatchObject({ lastInsertRowid: (first as { result: { lastInsertRowid: number } }).result.lastInsertRowid });
    const dropAgain = await pool.run({ ...drop, db });
    expect(dropAgain, JSON.stringify(dropAgain)).toMatchObject({ ok: true, replayed: true });
    const fresh = await pool.run({ ...insert, db, callKey: 'full/a.k-new' });
    expect(fresh, JSON.stringify(fresh)).toMatchObject({ ok: false, error: { code: 'STORAGE_FULL' } });
  });

  it('wrote each once', async () => {
    fs.rmSync(filler);
    expect((await pool.run({ op: 'evict', shards: [0] })).ok).toBe(true);
    const rows = new Database(db.path, { readonly: true });
    expect(rows.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 1 });
    expect(rows.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE name = 'gone'").get()).toEqual({ n: 0 });
    rows.close();
  });
});
