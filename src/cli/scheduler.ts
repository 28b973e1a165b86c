import { createLogger } from '../logger.ts';
import type { Redis } from 'ioredis';
import { checkRedis, connectRedis } from '../redis/connection.ts';
import { logRedisState } from '../redis/redis-state-log.ts';
import { Scheduler } from '../schedule/scheduler.ts';
import { EXIT, type CommandContext } from './context.ts';
import { untilSignal } from './signals.ts';
import { drainWithin, exitAfterGrace } from './drain.ts';

/**
 * `agentdb scheduler`: runs the scheduled jobs (the nightly prune) until stopped;
 * `agentdb scheduler --prune-now` runs every prune once (Redis, offloaded results, blob backups,
 * local history) and prints what each removed.
 */
export async function scheduler(ctx: CommandContext, flags: { pruneNow?: boolean }): Promise<number> {
  // BullMQ waits for a Redis that is down without a word; say so instead.
  await checkRedis(ctx.config.redisUrl);
  const logger = createLogger(ctx.config.logLevel, 'agentdb-scheduler');
  const s = new Scheduler(ctx.config, logger);
  let watch: Redis | undefined;
  try {
    if (flags.pruneNow) {
      // Everything the nightly jobs prune: Redis, offloaded results and blob backups, and this
      // machine's local history (as the history-prune job does where it runs).
      ctx.stdout.write(`${JSON.stringify({ ...(await s.prune()), history: s.pruneHistory() })}\n`);
      return 0;
    }
    // One log line when Redis goes away and one when it is back.
    watch = connectRedis(ctx.config.redisUrl, { name: 'agentdb-scheduler-watch' });
    logRedisState(watch, ctx.config.redisUrl, logger);
    await s.start();
    const next = new Date((await s.nextRun()) ?? 0).toISOString();
    // Listening before the line that says ready (see start.ts).
    const signal = untilSignal();
    logger.info({ next }, 'scheduler ready');
    logger.info({ signal: await signal }, 'stopping');
    if (!(await drainWithin(ctx.config.drainGraceMs, logger, () => s.stop()))) exitAfterGrace(logger, ctx.config.drainGraceMs, EXIT.failed);
    return 0;
  } finally {
    watch?.disconnect();
    await s.stop();
  }
}
