import { createLogger } from '../logger.ts';
import { ShardWorkerPool } from '../queue/shard-worker-pool.ts';
import { commandFlags } from './flags.ts';
import type { CommandContext } from './main.ts';
import { parseShardRange } from './shard-range.ts';
import { untilSignal } from './signals.ts';

/** `agentdb worker [--shards 0-7]`: owns the free shards of the range until stopped. */
export async function worker(ctx: CommandContext): Promise<number> {
  const parsed = commandFlags(ctx, 'worker', { args: ctx.argv, options: { shards: { type: 'string' } } });
  if (!parsed) return 2;
  const { values } = parsed;
  let shards: number[];
  try {
    shards = values.shards ? parseShardRange(values.shards, ctx.config.shardCount) : allShards(ctx.config.shardCount);
  } catch (err) {
    ctx.stderr.write(`agentdb worker: ${(err as Error).message}\n`);
    return 2;
  }
  const logger = createLogger(ctx.config.logLevel, 'agentdb-worker');
  const pool = new ShardWorkerPool({ config: ctx.config, shards, logger });
  await pool.start();
  logger.info({ shards: pool.ownedShards(), executorPid: pool.executorPid }, 'worker ready');
  await untilSignal();
  await pool.stop();
  return 0;
}

/** Every shard number, 0 to count - 1. */
export function allShards(count: number): number[] {
  return Array.from({ length: count }, (_, i) => i);
}
