import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecRequest } from '../../src/executor/executor-protocol.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { historyOpHandlers } from '../../src/shards/ops/history-ops.ts';
import type { ShardOpContext } from '../../src/shards/ops/shard-ops.ts';
import { pastMs } from '../helpers/history.ts';
import { mustRun, withHistoryPoolTarget } from '../helpers/history-pool.ts';

// Session 30, F6's fault ledger: `agentdb restore f4 --into f4/r7` ran to its end, then its job's
// lock was lost (Redis restarted from its AOF under it: "Missing lock … moveToFinished"), BullMQ
// ran the job again, and that run found f4/r7 and answered DATABASE_EXISTS, "nothing was
// changed", exit 1, for a fork that was there, whole. Here the op's handler run twice under one
// job, as BullMQ does; then under another job, whose restore into the name is refused as before.
const SHARDS = 4;
const ID = 'acme/a';
const by = { who: 'operator:test', via: 'operator' as const };
let dataDir: string;
let pool: ExecutorPool;
let db: DbTarget;
let write: (sql: string) => Promise<unknown>;

withHistoryPoolTarget(
  'agentdb-into-rerun-',
  { handleCacheSize: 8, checkpointBytes: 64 * 1024 * 1024 },
  { id: ID, shards: SHARDS, limits: PLAN_LIMITS.pro },
  (t) => ({ dataDir, pool, db, write } = t),
);

it('answers a run of the same restore --into again with its restore, and another op DATABASE_EXISTS', async () => {
  await write('CREATE TABLE t (x INTEGER)');
  for (let i = 0; i < 5; i++) await write(`INSERT INTO t VALUES (${i})`);
  const at = Date.now();
  pastMs(at);
  await write('INSERT INTO t VALUES (99)');
  const config = { dataDir, shardCount: SHARDS, historyRetentionDays: 30 } as unknown as Config;
  const logger = { info() {}, warn() {}, error() {}, debug() {} };
  const run = (job: { id: string; attemptsStarted: number }) =>
    historyOpHandlers().historyRestore!(
      { db: ID, args: { at, by, into: 'acme/copy' } } as never,
      {
        // A restore --into runs on the new database's shard.
        shard: shardOf('acme/copy', SHARDS),
        config,
        executor: pool,
        logger,
        job,
      } as unknown as ShardOpContext,
    ).catch((err: unknown) => err);

  const first = await run({ id: 'op.1', attemptsStarted: 1 });
  expect(first).toMatchObject({ into: 'acme/copy', dryRun: false });
  // Its lock lost after it ran: BullMQ takes the job again.
  const again = await run({ id: 'op.1', attemptsStarted: 2 });
  expect(again).toMatchObject({ into: 'acme/copy', dryRun: false, restoredTo: (first as { restoredTo: string }).restoredTo });
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
