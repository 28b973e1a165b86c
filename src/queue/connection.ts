import { Redis, type RedisOptions } from 'ioredis';

/**
 * Opens a Redis connection. `blocking` connections (BullMQ workers, stream readers) must
 * retry forever instead of failing a command, as BullMQ requires.
 */
export function connectRedis(url: string, opts: { blocking?: boolean; name?: string } = {}): Redis {
  const options: RedisOptions = {
    connectionName: opts.name,
    maxRetriesPerRequest: opts.blocking ? null : 20,
    enableReadyCheck: true,
  };
  const redis = new Redis(url, options);
  // Connection errors also fail the commands that wait on them, which is where callers see
  // and handle them; without a listener ioredis would print each reconnect attempt.
  redis.on('error', () => undefined);
  return redis;
}
