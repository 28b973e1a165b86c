import type { Logger } from '../logger.ts';
import { isConnectionFault } from './connection.ts';

/** Anything that emits 'error' events: a BullMQ Queue, Worker or QueueEvents, an ioredis client. */
interface ErrorEmitter {
  on(event: 'error', listener: (err: Error) => void): unknown;
}

/** The same error message is logged at most once in this long. */
const REPEAT_MS = 60_000;

/**
 * Listens to `emitter`'s 'error' events so none goes unheard. BullMQ re-emits every error of its
 * connection on each Queue and Worker; a Queue with no listener throws it, and BullMQ then
 * prints it with `console.error` (a multi-line dump, not JSON). Connection faults are not
 * logged here: the process's Redis state log says once that Redis is down (`redis-state-log.ts`).
 * Any other error is logged at error level under `msg`, each distinct message at most once a
 * minute with how many repeats it stood for, so a fault that recurs in a loop cannot flood the log.
 * Without a logger, errors are left to the commands that fail with them, where callers handle them.
 */
export function handleErrorEvents(emitter: ErrorEmitter, logger?: Logger, msg = 'redis client error', fields: Record<string, unknown> = {}): void {
  const seen = new Map<string, { at: number; repeats: number }>();
  emitter.on('error', (err: Error) => {
    if (!logger || isConnectionFault(err)) return;
    const text = String(err?.message ?? err);
    const now = Date.now();
    const last = seen.get(text);
    if (last && now - last.at < REPEAT_MS) {
      last.repeats++;
      return;
    }
    // The map stays small: one entry per distinct message, dropped once a minute has passed.
    for (const [k, v] of seen) if (now - v.at >= REPEAT_MS) seen.delete(k);
    seen.set(text, { at: now, repeats: 0 });
    logger.error({ ...fields, err: String(err), ...(last?.repeats ? { repeatsSinceLast: last.repeats } : {}) }, msg);
  });
}
