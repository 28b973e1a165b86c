import type { Redis } from 'ioredis';
import type { Logger } from '../logger.ts';
import { shownUrl } from './connection.ts';

/**
 * Says in the log, once each time, that a process's connection to Redis went down and that it
 * came back: one JSON line per change, never one per reconnect attempt. Every other 'error'
 * listener leaves connection faults to this one (see `error-events.ts`); before, a process with
 * Redis down logged ~29 lines a second, and BullMQ queues without a listener printed multi-line
 * `ECONNREFUSED` dumps that were not JSON.
 * @returns the function that stops watching.
 */
export function logRedisState(redis: Redis, url: string, logger: Logger): () => void {
  let downSince: number | undefined;
  const down = (why: string) => {
    if (downSince !== undefined) return;
    downSince = Date.now();
    logger.warn({ redis: 'down', url: shownUrl(url), why }, 'Redis does not answer; retrying until it does (logged again when it is back)');
  };
  // 'reconnecting', not 'close': a connection closed on purpose (a process stopping) closes
  // without reconnecting, and is no outage.
  const onReconnecting = () => down('connection lost');
  const onError = (err: Error) => down(err.message);
  const onReady = () => {
    if (downSince === undefined) return;
    const downMs = Date.now() - downSince;
    downSince = undefined;
    logger.info({ redis: 'up', url: shownUrl(url), downMs }, 'Redis answers again');
  };
  redis.on('reconnecting', onReconnecting);
  redis.on('error', onError);
  redis.on('ready', onReady);
  return () => {
    redis.off('reconnecting', onReconnecting);
    redis.off('error', onError);
    redis.off('ready', onReady);
  };
}
