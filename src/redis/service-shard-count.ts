import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

/**
 * Publishes the deployment's SHARD_COUNT under its prefix, as each worker does when it starts:
 * a client that was not told the count reads it instead of guessing 16, which for a service of
 * another count enqueued onto queues nobody serves (every call NO_WORKER, with no hint why).
 * No expiry: a client may start while every worker is down.
 */
export async function publishShardCount(redis: Redis, keys: Keys, shardCount: number): Promise<void> {
  await redis.set(keys.shardCount, String(shardCount));
}

/** The SHARD_COUNT the deployment's workers published, or undefined when none ever started here (or it is not a count). */
export async function publishedShardCount(redis: Redis, keys: Keys): Promise<number | undefined> {
  const raw = await redis.get(keys.shardCount);
  const n = raw === null ? Number.NaN : Number(raw);
  return Number.isInteger(n) && n >= 1 ? n : undefined;
}
