import { Queue, QueueKeys, QueueEvents, type Job } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardWorker } from '../../src/shards/shard-worker.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

let sb: Sandbox;
const closing: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const c of closing.splice(0).reverse()) await c.close();
  await sb.cleanup();
});

describe('a shard worker and its delayed jobs (issue 31)', () => {
  it('takes a retried job when its backoff ends, though it took the last waiting job meanwhile', async () => {
    sb = sandbox();
    const keys = keysFor(sb.config.prefix);
    const name = keys.queueName(0);
    const redis = connectRedis(sb.config.redisUrl);
    const connection = connectRedis(sb.config.redisUrl, { blocking: true });
    const queue = new Queue(name, { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
    const events = new QueueEvents(name, { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
    await events.waitUntilReady();
    const k = new QueueKeys(keys.bullPrefix).getKeys(name);
    const worker = new ShardWorker(
      name,
      async (job: Job) => {
        // A transient fault on the first attempt: BullMQ retries it after its backoff.
        if (job.data.retried && job.attemptsMade === 0) throw new Error('transient');
        return job.data.n;
      },
      // A blocking wait far longer than the test: the worker must wake for the due job itself.
      { connection, prefix: keys.bullPrefix, concurrency: 8, drainDelay: 120 },
    );
    closing.push({ close: async () => redis.disconnect() }, { close: async () => connection.disconnect() }, events, queue, worker);

    const retried = await queue.add('call', { n: 1, retried: true }, { attempts: 2, backoff: { type: 'fixed', delay: 1500 } });
    await expect.poll(async () => (await queue.getJob(retried.id!))?.attemptsMade).toBe(1);
    // The worker's blocking wait took the retry's own marker (member "1", its due time).
    await expect.poll(() => redis.zcard(k.marker!)).toBe(0);
    expect(await redis.zcard(k.delayed!)).toBe(1);
    // A job added before the retry is due is the last one waiting when the worker takes it.
    const other = await queue.add('call', { n: 2 });
    expect(await other.waitUntilFinished(events, 10_000)).toBe(2);
    expect(await retried.waitUntilFinished(events, 15_000)).toBe(1);
  }, 30_000);
});
