import { createLogger } from '../logger.ts';
import { Scheduler } from '../queue/scheduler.ts';
import { commandFlags } from './flags.ts';
import type { CommandContext } from './main.ts';
import { untilSignal } from './signals.ts';

/**
 * `agentdb scheduler`: runs the scheduled jobs (the nightly prune) until stopped;
 * `agentdb scheduler --prune-now` runs the prune once and prints what it removed.
 */
export async function scheduler(ctx: CommandContext): Promise<number> {
  const parsed = commandFlags(ctx, 'scheduler', { args: ctx.argv, options: { 'prune-now': { type: 'boolean', default: false } } });
  if (!parsed) return 2;
  const { values } = parsed;
  const logger = createLogger(ctx.config.logLevel, 'agentdb-scheduler');
  const s = new Scheduler(ctx.config, logger);
  try {
    if (values['prune-now']) {
      ctx.stdout.write(`${JSON.stringify(await s.prune())}\n`);
      return 0;
    }
    await s.start();
    logger.info({ next: new Date((await s.nextRun()) ?? 0).toISOString() }, 'scheduler ready');
    await untilSignal();
    return 0;
  } finally {
    await s.stop();
  }
}
