import path from 'node:path';
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecRequest } from '../../src/executor/executor-protocol.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { backupOp } from '../../src/shards/ops/backup-op.ts';
import { blobRestoreOp } from '../../src/shards/ops/blob-restore-op.ts';
import type { ShardOpContext } from '../../src/shards/ops/shard-ops.ts';
import { mustRun, withHistoryPoolTarget } from '../helpers/history-pool.ts';

// Session 31, F8: `agentdb restore acme/a --from-blob --into acme/copy` whose job's lock was lost
// after its first run had placed the fork (its worker SIGKILLed, Redis restarted), run again by
// BullMQ, answered DATABASE_EXISTS "nothing was changed" for a fork that was there, whole: F6 fixed
// this for a plain restore --into (restore-into-rerun.test.ts), not for --from-blob. Here the op's
// handler run twice under one job, as BullMQ does; then under other jobs, refused as before.
const SHARDS = 4;
const ID = 'acme/a';
const by = { who: 'operator:test', via: 'operator' as const };
let dataDir: string;
let pool: ExecutorPool;
let db: DbTarget;
let write: (sql: string) => Promise<unknown>;

withHistoryPoolTarget(
  'agentdb-blob-rerun-',
  { handleCacheSize: 8, checkpointBytes: 64 * 1024 * 1024 },
  { id: ID, shards: SHARDS, limits: PLAN_LIMITS.pro },
  (t) => ({ dataDir, pool, db, write } = t),
);

it('answers a run of the same restore --from-blob --into again with its restore, and another op DATABASE_EXISTS', async () => {
  await write('CREATE TABLE t (x INTEGER)');
  for (let i = 0; i < 5; i++) await write(`INSERT INTO t VALUES (${i})`);
  const config = { dataDir, shardCount: SHARDS, historyRetentionDays: 30, blob: { kind: 'folder', dir: path.join(dataDir, 'blobs') } } as unknown as Config;
  const logger = { info() {}, warn() {}, error() {}, debug() {} };
  const ctx = (shard: number, job: object) => ({ shard, config, executor: pool, logger, job }) as unknown as ShardOpContext;
  const backedUp = await backupOp({ args: { db: ID, reason: 'manual' } } as never, ctx(db.shard, { id: 'op.b', updateProgress: async () => undefined }));
  expect(backedUp).toMatchObject({ databases: [{ database: ID }] });
  await write('INSERT INTO t VALUES (99)');

  const run = (job: { id: string; attemptsStarted: number }) =>
    blobRestoreOp({ db: 'acme/copy', args: { source: ID, by } } as never, ctx(shardOf('acme/copy', SHARDS), job)).catch((err: unknown) => err);
  const first = await run({ id: 'op.1', attemptsStarted: 1 });
  expect(first).toMatchObject({ database: ID, into: 'acme/copy', dryRun: false });
  // Its lock lost after it placed the fork: BullMQ takes the job again.
  const again = await run({ id: 'op.1', attemptsStarted: 2 });
  const { restoredTo, snapshot, frames, commits } = first as Record<string, unknown>;
  expect(again).toMatchObject({ database: ID, into: 'acme/copy', dryRun: false, restoredTo, snapshot, frames, commits });
  expect(again).not.toHaveProperty('refused');
  // Another op, first run or not, finds the name taken.
  for (const job of [
    { id: 'op.2', attemptsStarted: 1 },
    { id: 'op.3', attemptsStarted: 2 },
  ])
    expect(await run(job), job.id).toMatchObject({ code: 'DATABASE_EXISTS' });

  const copy = databasePath(dataDir, 'acme', 'copy', shardOf('acme/copy', SHARDS));
  await mustRun(pool, { op: 'close', path: copy } as ExecRequest);
  const rows = new Database(copy, { readonly: true });
  expect(rows.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 5 });
  rows.close();
});
