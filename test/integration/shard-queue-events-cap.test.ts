import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { SHARD_QUEUE_EVENTS_MAX_LEN, ShardQueues } from '../../src/redis/shard-queues.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { REDIS_URL } from '../helpers/harness.ts';

// Hostile review of issue 27: BullMQ kept 10,000 events per shard queue's stream, trimmed by
// count only, so the `completed` events' envelopes (up to 64 KiB each) stayed there long after
// the workspace's Redis budget had let them go (~150 MB a shard). Both the calls' queues and the
// shard ops' queues of a shard write its cap into the queue's meta, so both must keep it low.
const prefix = `t-evcap-${randomUUID()}`;
const keys = keysFor(prefix);
const redis = new Redis(REDIS_URL);
afterAll(async () => {
  const doomed = await redis.keys(`${prefix}:*`);
  if (doomed.length > 0) await redis.del(...doomed);
  redis.disconnect();
});

it("keeps a shard queue's event stream near SHARD_QUEUE_EVENTS_MAX_LEN, whoever opened the queue", async () => {
  const queues = new ShardQueues(redis, keys);
  const ops = new ShardOpClient({ redisUrl: REDIS_URL, prefix });
  try {
    const queue = queues.of(3);
    await queue.waitUntilReady();
    for (let i = 0; i < 3 * SHARD_QUEUE_EVENTS_MAX_LEN; i += 500) {
      await queue.addBulk(Array.from({ length: 500 }, (_, j) => ({ name: 'c', data: { i: i + j }, opts: { jobId: `j${i + j}` } })));
    }
    const stream = `${keys.bullPrefix}:${keys.queueName(3)}:events`;
    // XTRIM MAXLEN ~ trims whole stream nodes (100 entries each).
    expect(await redis.xlen(stream)).toBeLessThanOrEqual(SHARD_QUEUE_EVENTS_MAX_LEN + 200);
    const meta = `${keys.bullPrefix}:${keys.queueName(3)}:meta`;
    expect(await redis.hget(meta, 'opts.maxLenEvents')).toBe(String(SHARD_QUEUE_EVENTS_MAX_LEN));
    // A shard op's queue on the same shard (the CLI's restore, backups) leaves the cap as it is.
    await redis.hdel(meta, 'opts.maxLenEvents');
    const opsQueue = (ops as unknown as { forShard(shard: number): { queue: { waitUntilReady(): Promise<unknown> } } }).forShard(3);
    await opsQueue.queue.waitUntilReady();
    await expect.poll(() => redis.hget(meta, 'opts.maxLenEvents')).toBe(String(SHARD_QUEUE_EVENTS_MAX_LEN));
  } finally {
    await queues.close();
    await ops.close();
  }
});
