import type { Job } from 'bullmq';
import type { Config } from '../../config.ts';
import type { ShardOpJobData, ShardOpOutcome } from '../../contracts/shard-op.ts';
import { codeOf } from '../../errors.ts';
import { isDiskFull } from '../../sqlite/sqlite-errors.ts';
import type { Logger } from '../../logger.ts';
import type { ExecutorPool } from '../../executor/executor-pool.ts';
import type { WorkspaceQuota } from '../../history/workspace-quota.ts';
import type { RestoreRecord } from '../../calls/taken-back.ts';
import { browseOps } from './browse-ops.ts';
import { backupOp } from './backup-op.ts';
import { blobHoldingsOp } from './blob-holdings-op.ts';
import { blobRestoreOp } from './blob-restore-op.ts';
import { historyOpHandlers } from './history-ops.ts';

/** What a shard op handler may use: the shard it runs on, the worker's executor pool, config. */
export interface ShardOpContext {
  shard: number;
  executor: ExecutorPool;
  config: Config;
  logger: Logger;
  job: Job<ShardOpJobData>;
  /** The disk quotas a fork is checked against; absent (tests of one op), nothing is checked. */
  quota?: WorkspaceQuota;
  /**
   * Keeps a restore done in place in its database's record in Redis (`taken-back.ts`), so a
   * write's answer read after it says the restore took it back; absent (tests of one op), none is kept.
   */
  noteRestore?: (database: string, record: RestoreRecord) => Promise<void>;
}

/**
 * One kind of shard op. Returns the result (JSON-serialisable), or throws an `AgentDbError`
 * (a registry code, answered as `ok: false`); any other throw is a fault, retried by BullMQ.
 */
export type ShardOpHandler = (data: ShardOpJobData, ctx: ShardOpContext) => Promise<unknown>;

/**
 * Every shard op a worker runs, by name. Built when a worker starts (nothing is registered on
 * import); one line per op.
 */
export function shardOpHandlers(): Record<string, ShardOpHandler> {
  return {
    // Proves a shard has a live owner (tests, `agentdb` health checks).
    ping: async () => ({ pong: true }),
    // The data browser's reads: browse.tables, browse.figures, browse.page, browse.csv, browse.files.
    ...browseOps(),
    // Uploads each database's new snapshots and closed history segments to the blob store.
    backup: backupOp,
    // Rebuilds a database missing here from the blob store alone (`agentdb restore --from-blob`).
    restoreFromBlob: blobRestoreOp,
    // What the blob store holds, as the workers see it (`restore --from-blob --all`).
    blobHoldings: blobHoldingsOp,
    // Point-in-time history: restore (in place, undo, into), list, nightly snapshot.
    ...historyOpHandlers(),
  };
}

/**
 * Runs one shard op job by its name (not a call: no agent share, no parking, no metering). An
 * `AgentDbError` is an answer; anything else is a fault and fails the job for BullMQ to retry.
 */
export async function runShardOp(
  ops: Record<string, ShardOpHandler>,
  job: Job<ShardOpJobData>,
  at: Omit<ShardOpContext, 'job' | 'logger'> & { logger: Logger },
): Promise<ShardOpOutcome> {
  const handler = Object.hasOwn(ops, job.data.op) ? ops[job.data.op] : undefined;
  if (!handler) return { ok: false, error: { code: 'INVALID_ARGUMENTS', detail: `no shard op named "${job.data.op}"` } };
  const logger = at.logger.child({ op: job.data.op, jobId: job.id, shard: at.shard });
  try {
    const result = await handler(job.data, {
      shard: at.shard,
      executor: at.executor,
      config: at.config,
      logger,
      job,
      ...(at.quota ? { quota: at.quota } : {}),
      ...(at.noteRestore ? { noteRestore: at.noteRestore } : {}),
    });
    return { ok: true, result };
  } catch (err) {
    // A full disk is an answer too (STORAGE_FULL, retryable once there is room), as a call's is:
    // thrown on, BullMQ ran the op twice more and its caller got a raw ENOSPC (F5's ledger: five
    // `restore --from-blob` printed BullMQ's stack trace on a full data disk).
    const code = codeOf(err) ?? (isDiskFull(err) ? 'STORAGE_FULL' : undefined);
    if (!code) throw err;
    return { ok: false, error: { code, detail: (err as { detail?: string }).detail ?? String(err) } };
  }
}
