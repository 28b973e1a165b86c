import type { Redis } from 'ioredis';
import { SHARD_OP_PREFIX } from '../../src/contracts/shard-op.ts';

/** The shard ops' jobs left in Redis under `prefix` (BullMQ's job hashes, named `op:<op>`). */
export async function opJobsLeft(redis: Redis, prefix: string): Promise<number> {
  let cursor = '0';
  let found = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) if ((await redis.type(key)) === 'hash' && (await redis.hget(key, 'name'))?.startsWith(SHARD_OP_PREFIX)) found++;
  } while (cursor !== '0');
  return found;
}
