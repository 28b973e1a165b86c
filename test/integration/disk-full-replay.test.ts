import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { fillToLastByte, removeTmpfsFolder, tmpfsFolder } from '../helpers/tmpfs.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';
import { expectReplayed, expectWroteOnce, runOnce } from '../helpers/replay-on-full-disk.ts';

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
  let first: ExecOutcome;

  beforeAll(async () => {
    pool = await oneChildPool(mnt);
    db = historyTarget(mnt, 'full/a');
    first = await runOnce(pool, db, 'full/a');
    // Every handle closed (its child gone with its worker), then the disk fills to the last byte.
    expect((await pool.run({ op: 'evict', shards: [0] })).ok).toBe(true);
    fillToLastByte(filler);
    expect(fs.statfsSync(mnt).bavail).toBe(0);
  });

  afterAll(async () => {
    await pool?.stop();
    removeTmpfsFolder(mnt, refused);
  });

  it('answers the write and the drop from their records, and a new write STORAGE_FULL', async () => {
    await expectReplayed(pool, db, 'full/a', first);
  });

  it('wrote each once', async () => {
    fs.rmSync(filler);
    await expectWroteOnce(pool, db);
  });
});
