import type { Redis } from 'ioredis';

/**
 * Closes `redis` after the commands in flight: QUIT, which Redis answers after every command sent
 * before it, or a plain disconnect once `ms` passed without its answer, so a Redis that stops
 * answering cannot hold a process open.
 */
export async function quitWithin(redis: Redis, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  try {
    await Promise.race([
      redis.quit().then(
        () => undefined,
        () => undefined,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
    redis.disconnect();
  }
}
