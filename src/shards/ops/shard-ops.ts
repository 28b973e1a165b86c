import type { Job } from 'bullmq';
import type { Config } from '../../config.ts';
import type { ShardOpJobData } from '../../contracts/shard-op.ts';
import type { Logger } from '../../logger.ts';
import type { ExecutorPool } from '../../executor/executor-pool.ts';
import { browseOps } from './browse-ops.ts';
import { backupOp } from './backup-op.ts';
import { blobRestoreOp } from './blob-restore-op.ts';
import { historyOpHandlers } from './history-ops.ts';

/** What a shard op handler may use: the shard it runs on, the worker's executor pool, config. */
export interface ShardOpContext {
  shard: number;
  executor: ExecutorPool;
  config: Config;
  logger: Logger;
  job: Job<ShardOpJobData>;
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
    // The data browser's reads: browse.tables, browse.page, browse.csv, browse.files.
    ...browseOps(),
    // Uploads each database's new snapshots and closed history segments to the blob store.
    backup: backupOp,
    // Rebuilds a database missing here from the blob store alone (`agentdb restore --from-blob`).
    restoreFromBlob: blobRestoreOp,
    // Point-in-time history: restore (in place, undo, into), list, nightly snapshot.
    ...historyOpHandlers(),
  };
}
