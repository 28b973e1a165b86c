import { serveMetrics } from '../http/metrics-server.ts';
import { createLogger } from '../logger.ts';
import { Metrics } from '../metrics.ts';
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
  // With WORKER_METRICS_PORT, its own /metrics: what its workers count is seen nowhere else.
  const metrics = ctx.config.workerMetricsPort > 0 ? new Metrics() : undefined;
  const pool = new ShardWorkerPool({ config: ctx.config, shards, logger, ...(metrics ? { metrics } : {}) });
  await pool.start();
  let server: Awaited<ReturnType<typeof serveMetrics>> | undefined;
  if (metrics) {
    try {
      const { host, workerMetricsPort: port, metricsToken: token } = ctx.config;
      server = await serveMetrics({ metrics, host, port, logger, ...(token ? { token } : {}) });
    } catch (err) {
      await pool.stop();
      watch.disconnect();
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EADDRINUSE' && code !== 'EACCES') throw err;
      ctx.stderr.write(
        `agentdb worker: WORKER_METRICS_PORT ${ctx.config.workerMetricsPort} on ${ctx.config.host} cannot be opened (${code}). Set a free port, or 0 for none.\n`,
      );
      return EXIT.usage;
    }
  }
  // Listening before the line that says ready (see start.ts).
  const signal = untilSignal();
  logger.info({ shards: pool.ownedShards(), executorPid: pool.executorPid, ...(server ? { metrics: server.address } : {}) }, 'worker ready');
  logger.info({ signal: await signal }, 'stopping');
  const drained = await drainWithin(ctx.config.drainGraceMs, logger, async () => {
    await server?.app.close();
    await pool.stop();
  });
  watch.disconnect();
  if (!drained) exitAfterGrace(logger, ctx.config.drainGraceMs, EXIT.failed);
  return 0;
}

/** Every shard number, 0 to count - 1. */
export function allShards(count: number): number[] {
  return Array.from({ length: count }, (_, i) => i);
}
