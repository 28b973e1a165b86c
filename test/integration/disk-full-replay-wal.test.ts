import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { fillToLastByte, removeTmpfsFolder, tmpfsFolder } from '../helpers/tmpfs.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';
import { expectReplayed, expectWroteOnce, runOnce } from '../helpers/replay-on-full-disk.ts';

// Session 32, F9 (F8's leftover): a write that had committed, run again on a full disk (its
// worker SIGKILLed before the answer, the job taken over), was answered STORAGE_FULL "nothing was
// written" when its database's child had died holding it: its WAL still held the commit, the
// database could not be opened (its -shm needs room), and the closed file was read only when its
// WAL was empty. Now the WAL's committed frames are read over the file, in memory. (On main
// this file's first test fails: STORAGE_FULL.)

const { mnt, refused } = tmpfsFolder('agentdb-replay-wal-', '8m', 'disk-full-replay-wal.test.ts');

/** Whether process `pid` runs still (neither gone nor a zombie awaiting its reaper). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) [ZX]/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

describe.runIf(!refused)('a write or drop run again on a full disk, its child killed holding the WAL', () => {
  let pool: ExecutorPool;
  let db: DbTarget;
  const filler = path.join(mnt, 'filler');
  let first: ExecOutcome;

  beforeAll(async () => {
    // No checkpoint by history: the commits stay in the WAL.
    pool = await oneChildPool(mnt, { checkpointBytes: 64 * 1024 * 1024 });
    db = historyTarget(mnt, 'fw/a');
    first = await runOnce(pool, db, 'fw/a');
  });

  afterAll(async () => {
    await pool?.stop();
    removeTmpfsFolder(mnt, refused);
  });

  it('answers the write and the drop from their records in the WAL, and a new write STORAGE_FULL', async () => {
    // The child dies holding the database (its worker SIGKILLed): the WAL keeps the commits.
    const child = pool.pids[0]!;
    process.kill(child, 'SIGKILL');
    await expect.poll(() => running(child), { timeout: 10_000 }).toBe(false);
    // Its replacement up, and what the pool clears after a death cleared, before the disk fills.
    const other = historyTarget(mnt, 'fw/b');
    expect((await pool.run({ op: 'query', db: other, sql: 'SELECT 1', params: [], maxRows: 1 })).ok).toBe(true);
    expect(fs.statSync(`${db.path}-wal`).size).toBeGreaterThan(32);
    // The first connection to open it truncates the -shm and grows it again: on a full disk,
    // whatever takes its pages meanwhile leaves the open without them (SQLITE_IOERR_SHMSIZE).
    // Here its pages go to the filler before the open.
    fs.rmSync(`${db.path}-shm`);
    fillToLastByte(filler);
    expect(fs.statfsSync(mnt).bavail).toBe(0);
    await expectReplayed(pool, db, 'fw/a', first);
  });

  it('wrote each once', async () => {
    fs.rmSync(filler);
    await expectWroteOnce(pool, db);
  });
});
