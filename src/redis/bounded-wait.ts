import type { Redis } from 'ioredis';

/** What {@link within} answers when the bound passed first. */
export const TIMED_OUT = Symbol('timed out');

/**
 * `work`'s value, or {@link TIMED_OUT} once `ms` have passed without it. The work itself goes on
 * (a Redis command cannot be taken back); only the wait is bounded. A probe that waits on Redis
 * without a bound answered a health check after 7.6 s, past Docker's 3 s timeout.
 */
export async function within<T>(ms: number, work: Promise<T>): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const cut = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), ms);
  });
  try {
    return await Promise.race([work, cut]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Whether `redis` answers a PING within `ms`. A connection that is not ready answers false at
 * once: its PING would wait in ioredis's offline queue through ~10 s of reconnects.
 */
export async function pingWithin(redis: Redis, ms: number): Promise<boolean> {
  if (redis.status !== 'ready') return false;
  try {
    return (await within(ms, redis.ping())) === 'PONG';
  } catch {
    return false;
  }
}
