import type { Redis } from 'ioredis';

/**
 * Counts the commands `redis` sends from now on (each of a pipeline's, a script's call as one):
 * how a test tells that a cache answered, or that a lookup went to Redis. Returns the count so far.
 */
export function countCommands(redis: Redis): () => number {
  let sent = 0;
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => {
    sent++;
    return send(...args);
  }) as Redis['sendCommand'];
  return () => sent;
}
