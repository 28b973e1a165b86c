import { Queue, QueueKeys, Worker, type Job } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardWorker } from '../../src/shards/shard-worker.ts';
import { StaleMarkers } from '../../src/shards/stale-markers.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

let sb: Sandbox;
const closing: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const c of closing.splice(0).reverse()) await c.close();
  await sb.cleanup();
});

/** A shard queue of the sandbox, a worker that takes its jobs by hand, and the marker's keys. */
async function shardQueue() {
  sb = sandbox();
  const keys = keysFor(sb.config.prefix);
  const redis = connectRedis(sb.config.redisUrl);
  closing.push({ close: async () => redis.disconnect() });
  const name = keys.queueName(0);
  const connection = { url: sb.config.redisUrl };
  const queue = new Queue(name, { connection, prefix: keys.bullPrefix });
  const worker = new Worker(name, null, { connection, prefix: keys.bullPrefix, autorun: false });
  closing.push(queue, worker);
  const k = new QueueKeys(keys.bullPrefix).getKeys(name);
  const markerKeys = { marker: k.marker!, wait: k.wait!, prioritized: k.prioritized!, delayed: k.delayed! };
  const marked = async () => (await redis.zscore(markerKeys.marker, '0')) !== null;
  return { redis, queue, worker, markerKeys, marked, markers: new StaleMarkers(redis) };
}

describe('stale queue markers (issue 31)', () => {
  it('clears the marker BullMQ leaves when it hands a job over, when no other job can be taken', async () => {
    const { redis, queue, worker, markerKeys, marked, markers } = await shardQueue();
    await queue.add('call', { n: 1 });
    expect(await marked()).toBe(true);
    const job = await worker.getNextJob('token-1');
    expect(job?.data).toEqual({ n: 1 });
    // BullMQ's moveToActive marked the queue again, though nothing is left to take.
    expect(await marked()).toBe(true);
    await markers.around(0, markerKeys, false, async () => {
      // Commands on one connection run in order: the check sent before this one has run.
      await redis.ping();
      expect(await marked()).toBe(false);
    });
  });

  it('keeps the marker while a job waits, a delayed one is due, or another job is in hand', async () => {
    const { redis, queue, markerKeys, marked, markers } = await shardQueue();
    await queue.add('call', { n: 1 });
    await markers.around(0, markerKeys, false, () => redis.ping());
    expect(await marked()).toBe(true);
    await queue.drain();

    // A delayed job due now (BullMQ scores it by due time × 0x1000), not yet promoted.
    await redis.zadd(markerKeys.marker, 0, '0');
    await redis.zadd(markerKeys.delayed, (Date.now() - 1000) * 0x1000, 'due');
    await markers.around(0, markerKeys, false, () => redis.ping());
    expect(await marked()).toBe(true);

    // One due later: its own marker (member "1") wakes the worker then, and stays.
    await redis.zrem(markerKeys.delayed, 'due');
    await redis.zadd(markerKeys.delayed, (Date.now() + 60_000) * 0x1000, 'later');
    await redis.zadd(markerKeys.marker, Date.now() + 60_000, '1');
    await markers.around(0, markerKeys, false, () => redis.ping());
    expect(await marked()).toBe(false);
    expect(await redis.zscore(markerKeys.marker, '1')).not.toBeNull();

    // A second job in hand on the same shard sends no check: the fetch loop is busy anyway.
    await redis.zadd(markerKeys.marker, 0, '0');
    await markers.around(0, markerKeys, false, async () => {
      await redis.ping();
      expect(await marked()).toBe(false);
      await redis.zadd(markerKeys.marker, 0, '0');
      await markers.around(0, markerKeys, false, () => redis.ping());
      expect(await marked()).toBe(true);
    });
  });

  it("a shard worker's own fetch clears the marker when it takes the last job, and keeps it while another waits", async () => {
    const { queue, marked } = await shardQueue();
    const keys = keysFor(sb.config.prefix);
    const connection = connectRedis(sb.config.redisUrl, { blocking: true });
    const worker = new ShardWorker(keys.queueName(0), null as never, { connection, prefix: keys.bullPrefix, autorun: false });
    closing.push({ close: async () => connection.disconnect() }, worker);
    await queue.add('call', { n: 1 });
    await queue.add('call', { n: 2 });
    const first = await worker.getNextJob('token-1');
    expect(first?.data).toEqual({ n: 1 });
    expect(worker.markerChecked(first!)).toBe(true);
    // Another job waits: its marker stays, for the fetch that takes it.
    expect(await marked()).toBe(true);
    const second = await worker.getNextJob('token-2');
    expect(second?.data).toEqual({ n: 2 });
    // The last one: BullMQ's moveToActive left a marker, the same script took it away.
    expect(await marked()).toBe(false);
  });

  it('a shard worker runs every job of a sequence and those added while one runs, none left waiting', async () => {
    sb = sandbox();
    const keys = keysFor(sb.config.prefix);
    const connection = connectRedis(sb.config.redisUrl, { blocking: true });
    const queue = new Queue(keys.queueName(0), { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
    const ran: number[] = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const worker = new ShardWorker(
      keys.queueName(0),
      async (job: Job) => {
        ran.push(job.data.n);
        // The first job holds on until the next has been added: that job must wake the worker,
        // which went to its blocking wait as it took the first (the last one then).
        if (job.data.n === 0) await gate;
        return job.data.n;
      },
      { connection, prefix: keys.bullPrefix, concurrency: 32 },
    );
    closing.push({ close: async () => connection.disconnect() }, queue, worker);
    const first = await queue.add('call', { n: 0 });
    await expect.poll(() => ran).toEqual([0]);
    const second = await queue.add('call', { n: 1 });
    await expect.poll(() => ran).toEqual([0, 1]);
    release();
    for (const job of [first, second]) await expect.poll(async () => (await queue.getJob(job.id!))?.finishedOn).toBeDefined();
    // One at a time, each after the other finished: every one is taken by a fetch of its own.
    for (let n = 2; n < 12; n++) {
      const job = await queue.add('call', { n });
      await expect.poll(async () => (await queue.getJob(job.id!))?.returnvalue).toBe(n);
    }
    expect(ran).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
  });
});
