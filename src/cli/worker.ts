import { createLogger } from '../logger.ts';
import { checkRedis, connectRedis } from '../redis/connection.ts';
import { logRedisState } from '../redis/redis-state-log.ts';
import { ShardWorkerPool } from '../shards/shard-worker-pool.ts';
import { EXIT, UsageError, type CommandContext } from './context.ts';
import { parseShardRange } from './shard-range.ts';
import { untilSignal } from './signals.ts';
import { drainWithin, exitAfterGrace } from './drain.ts';

/** `agentdb worker [--shards 0-7]`: owns the free shards of the range until stopped. */
export async function worker(ctx: CommandContext, flags: { shards?: string }): Promise<number> {
  let shards: number[];
  try {
    shards = flags.shards ? parseShardRange(flags.shards, ctx.config.shardCount) : allShards(ctx.config.shardCount);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  // BullMQ waits for a Redis that is down without a word; say so instead.
  await checkRedis(ctx.config.redisUrl);
  const logger = createLogger(ctx.config.logLevel, 'agentdb-worker');
  // One log line when Redis goes away and one when it is back (a connection of its own: the
  // pool's are many, and each would say it).
  const watch = connectRedis(ctx.config.redisUrl, { name: 'agentdb-worker-watch' });
  logRedisState(watch, ctx.config.redisUrl, logger);
  const pool = new ShardWorkerPool({ config: ctx.config, shards, logger });
  await pool.start();
  logger.info({ shards: pool.ownedShards(), executorPid: pool.executorPid }, 'worker ready');
  logger.info({ signal: await untilSignal() }, 'stopping');
  const drained = await drainWithin(ctx.config.drainGraceMs, logger, () => pool.stop());
  watch.disconnect();
  if (!drained) exitAfterGrace(logger, ctx.config.drainGraceMs, EXIT.failed);
  return 0;
}

/** Every shard number, 0 to count - 1. */
export function allShards(count: number): number[] {
  return Array.from({ length: count }, (_, i) => i);
}
