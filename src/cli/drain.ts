import type { Logger } from '../logger.ts';
import { interruption } from './signals.ts';

/**
 * Runs a process's stop and waits for it at most `graceMs` (DRAIN_GRACE_MS), or until a second
 * SIGTERM or SIGINT (a person pressing Ctrl-C again). True when it finished; false when the
 * grace ran out or the second signal came first, and the caller then exits without it. A stop
 * waits for Redis (jobs in hand complete there, leases go back there), so during an outage it
 * never finished: a tester's process was alive 45 s after SIGTERM, and went on running shard
 * jobs when Redis returned.
 */
export async function drainWithin(graceMs: number, logger: Logger, stop: () => Promise<void>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const cut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)));
  const again = interruption();
  const done = stop().then(
    () => true as const,
    (err: unknown) => {
      logger.error({ err: String(err) }, 'stopping failed');
      return true as const;
    },
  );
  try {
    return await Promise.race([done, cut, again.signal.then(() => false as const)]);
  } finally {
    clearTimeout(timer);
    again.stop();
  }
}

/**
 * Ends the process now with `code`, once the drain grace has run out (or a second signal came):
 * what is still open waits for Redis and would keep it alive (and take jobs again when Redis
 * returns). Jobs it held are retried by the next owner of their shard (exactly-once keeps
 * writes single).
 */
export function exitAfterGrace(logger: Logger, graceMs: number, code: number): never {
  logger.warn(
    { graceMs },
    'stopping did not finish within the drain grace (Redis does not answer?), or a second signal came; exiting without waiting for the rest',
  );
  logger.flush?.();
  process.exit(code);
}
