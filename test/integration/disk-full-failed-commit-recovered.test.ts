import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';
import { removeTmpfsFolder, tmpfsFolder, withRoom } from '../helpers/tmpfs.ts';
import { fillToIndexEdge, firstFailedWrite, smallPageDatabase } from '../helpers/wal-index-edge.ts';

// Session 31, F8's fault ledger (runs 3 and 5): a write answered STORAGE_FULL on a full disk was
// in its database later. SQLite wrote the transaction's every frame, its commit frame included,
// then could not grow the -shm to enter them in the WAL index (SQLITE_IOERR_SHMSIZE) and failed
// the write (G7's finding); the child was then SIGKILLed before another write went over those
// frames, and the next child's connection, recovering the WAL from the file, took them for a
// commit. The failed write's frames are cut from the WAL now. Pages of 512 bytes, as in
// history-rolled-back-commit-frame.test.ts: frame 4063, where the WAL index needs its second
// 32 KiB, is 2 MB into the WAL.

const { mnt, refused } = tmpfsFolder('agentdb-failed-commit-', '16m', 'disk-full-failed-commit-recovered.test.ts');

describe.runIf(!refused)('a write that failed on a full disk, its child SIGKILLed after', () => {
  let pool: ExecutorPool;
  let db: DbTarget;
  const filler = path.join(mnt, 'filler');
  let seq = 0;
  const write = (sql: string) => pool.run({ op: 'write', db, sql, params: [], callKey: `fc/a.k${++seq}` });

  beforeAll(async () => {
    pool = await oneChildPool(mnt, { checkpointBytes: 64 * 1024 * 1024 });
    db = historyTarget(mnt, 'fc/a');
    smallPageDatabase(db.path);
  });

  afterAll(async () => {
    await pool?.stop();
    removeTmpfsFolder(mnt, refused);
  });

  it('stays not written when the WAL is recovered', async () => {
    expect(
      (await write("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 15000) INSERT INTO t (v) SELECT printf('%0100d', i) FROM c")).ok,
    ).toBe(true);
    await fillToIndexEdge(write, db.path);
    // The disk full but for 7 pages: room for a commit's frames, not for the WAL index's next 32 KiB.
    let failed: { v: string; out: ExecOutcome } | undefined;
    const child = await withRoom(filler, 7 * 4096, async () => {
      failed = await firstFailedWrite(write, (i) => `edge ${i}`);
      expect(failed?.out, 'a write failed on the full disk').toMatchObject({ ok: false, error: { code: 'STORAGE_FULL' } });
      // Its child dies before anything else is written (its worker SIGKILLed, a kill from outside).
      const killed = pool.pids[0]!;
      process.kill(killed, 'SIGKILL');
      return killed;
    });
    const read = await pool.run({ op: 'query', db, sql: 'SELECT count(*) FROM t WHERE v = ?', params: [failed!.v], maxRows: 1 });
    expect(pool.pids[0]).not.toBe(child);
    expect(read, JSON.stringify(read)).toMatchObject({ ok: true, result: { rows: [[0]] } });
  });
});
