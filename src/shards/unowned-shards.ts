import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';

/**
 * Which of `shards` no worker process holds the lease of now: calls to them would wait until
 * one does. One GET per lease, pipelined (each lease has its own hash tag, so no multi-key
 * command); a shard whose GET failed counts as without owner.
 */
export async function shardsWithoutLease(redis: Redis, keys: Keys, shards: readonly number[]): Promise<number[]> {
  if (shards.length === 0) return [];
  const pipeline = redis.pipeline();
  for (const shard of shards) pipeline.get(keys.lease(shard));
  const holders = (await pipeline.exec()) ?? [];
  return shards.filter((_, i) => {
    const [err, holder] = holders[i] ?? [];
    return err || holder === null || holder === undefined;
  });
}
