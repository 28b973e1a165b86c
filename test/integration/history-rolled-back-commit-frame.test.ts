import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeOf } from '../../src/errors.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { integrity, pastMs } from '../helpers/history.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';
import { removeTmpfsFolder, tmpfsFolder, withRoom } from '../helpers/tmpfs.ts';
import { fillToIndexEdge, firstFailedWrite, smallPageDatabase } from '../helpers/wal-index-edge.ts';

// Session 30, G7 (the fault ledger's run 3, F6's (g)): on a full disk SQLite can write a
// transaction's every frame, its commit frame included, into the WAL and then fail to enter them
// in the WAL index (its -shm cannot grow: SQLITE_IOERR_SHMSIZE). The write fails and SQLite writes
// the next transaction over those frames, but they chain and check like any commit. A capture
// that ran in between (here the worker's `capture`; in the ledger, a copy retried after the full
// disk's failed ones) copied that commit that never was; every real commit after it then failed
// the chain from it, so copies found nothing and said nothing, and closing the database
// checkpointed them into the file uncopied: restores answered ok with acknowledged rows missing
// (and the never-acknowledged one present), later ones malformed. Capture now copies no commit
// past where the WAL index says the committed frames end.
//
// A tmpfs mounted here, pages of 512 bytes (frame 4063, where the WAL index needs its second
// 32 KiB, is 2 MB into the WAL), history's checkpoints past the test's WAL.

const { mnt, refused } = tmpfsFolder('agentdb-rolled-back-frame-', '16m', 'history-rolled-back-commit-frame.test.ts');

describe.runIf(!refused)('a commit frame SQLite rolled back, on a full disk', () => {
  let pool: ExecutorPool;
  let db: DbTarget;
  const filler = path.join(mnt, 'filler');
  let seq = 0;
  const write = (sql: string) => pool.run({ op: 'write', db, sql, params: [], callKey: `k${++seq}` });
  const ok = (out: ExecOutcome) => {
    expect(out.ok, JSON.stringify(out)).toBe(true);
    return out;
  };
  /** Each acknowledged write's value, and when it was answered. */
  const acked: { v: string; at: number }[] = [];
  const tagged = async (v: string) => {
    ok(await write(`INSERT INTO t (v) VALUES ('${v}')`));
    acked.push({ v, at: Date.now() });
    pastMs(Date.now());
  };

  beforeAll(async () => {
    pool = await oneChildPool(mnt, { checkpointBytes: 64 * 1024 * 1024 });
    db = historyTarget(mnt, 'rb/a');
    smallPageDatabase(db.path);
  });

  afterAll(async () => {
    await pool?.stop();
    removeTmpfsFolder(mnt, refused);
  });

  it('history never holds it, and every restore after holds each acknowledged write (or refuses)', async () => {
    ok(await write("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 15000) INSERT INTO t (v) SELECT printf('%0100d', i) FROM c"));
    await tagged('before');
    await fillToIndexEdge(write, db.path);
    // The disk full but for 7 pages: room for a commit's frames, not for the WAL index's next 32 KiB.
    await withRoom(filler, 7 * 4096, async () => {
      const failed = (
        await firstFailedWrite(
          write,
          () => 'near the edge',
          (v) => acked.push({ v, at: Date.now() }),
        )
      )?.out;
      expect(failed, 'a write failed on the full disk').toMatchObject({ ok: false, error: { code: 'STORAGE_FULL' } });
    });
    // Room back; a capture before the next write (a restore's, a backup's, a failed copy's retry).
    ok(await pool.run({ op: 'capture', db }));
    for (const v of ['w1', 'w2', 'w3']) await tagged(v);
    // Closed (the last connection: SQLite checkpoints), then written again.
    ok(await pool.run({ op: 'evict', shards: [0] }));
    await tagged('w4');
    ok(await pool.run({ op: 'capture', db }));

    const source = localSource(mnt, db.id);
    for (const [n, { at }] of acked.entries()) {
      if (acked[n + 1]?.at === at) continue;
      const file = path.join(mnt, `restored-${n}.sqlite`);
      let plan: ReturnType<typeof planRestore>;
      try {
        plan = planRestore(source, { at });
      } catch (err) {
        expect(codeOf(err), `the moment of ${acked[n]!.v}`).toBe('HISTORY_LOST');
        continue;
      }
      buildRestore(plan, file);
      expect(integrity(file), `the moment of ${acked[n]!.v}`).toBe('ok');
      const restored = new Database(file, { readonly: true });
      const values = restored.prepare("SELECT v FROM t WHERE v != 'filling' AND length(v) < 100 ORDER BY id").pluck().all();
      restored.close();
      fs.rmSync(file);
      expect(values, `the moment of ${acked[n]!.v}`).toEqual(acked.slice(0, n + 1).map((a) => a.v));
    }
  });
});
