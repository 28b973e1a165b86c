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
  return new Redis(url, options);
}
