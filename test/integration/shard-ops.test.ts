import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, Worker } from 'bullmq';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

describe('shard ops', () => {
  let box: Sandbox;
  let ops: ShardOpClient;
  beforeAll(async () => {
    box = sandbox();
    await box.pool([0, 1]);
    ops = new ShardOpClient({ redisUrl: box.config.redisUrl, prefix: box.config.prefix });
  });
  afterAll(async () => {
    await ops.close();
    await box.cleanup();
  });

  it('runs on the shard owner and answers its result', async () => {
    expect(await ops.run(1, 'ping', {})).toEqual({ ok: true, result: { pong: true } });
  });

  it('answers an unknown op with INVALID_ARGUMENTS, not a fault', async () => {
    const out = await ops.run(0, 'nope', {});
    expect(out).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENTS' } });
  });

  it('answers even when its completion event goes unheard', async () => {
    const lost = new ShardOpClient({ redisUrl: box.config.redisUrl, prefix: box.config.prefix });
    try {
      // Shard 2 has no owner yet. Its event reader is readied, then deafened: only the job
      // itself can tell the outcome, which comes once an owner starts (after the wait began).
      const internals = lost as unknown as { forShard(shard: number): { ready: Promise<unknown>; events: { emit: () => boolean } } };
      const q = internals.forShard(2);
      await q.ready;
      q.events.emit = () => false;
      const answer = lost.run(2, 'ping', {}, { timeoutMs: 30_000 });
      await box.pool([2]);
      expect(await answer).toEqual({ ok: true, result: { pong: true } });
    } finally {
      await lost.close();
    }
  });

  it('does not take an op name from the prototype', async () => {
    expect(await ops.run(0, 'constructor', {})).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENTS' } });
  });

  it('withdraws an op no worker takes, says so once while waiting, and answers NO_WORKER', async () => {
    // Shard 3 never gets an owner here: as for a CLI whose AGENTDB_PREFIX is not the server's.
    const notes: number[] = [];
    const answer = ops.run(3, 'ping', {}, { db: 'w/a', timeoutMs: 60_000, pickup: { noteAfterMs: 0, timeoutMs: 1500, onUnclaimed: (ms) => notes.push(ms) } });
    await expect(answer).rejects.toMatchObject({ code: 'NO_WORKER', detail: expect.stringContaining('ping (shard 3, w/a)') });
    expect(notes).toHaveLength(1);
    const keys = keysFor(box.config.prefix);
    const queue = new Queue(keys.queueName(3), { connection: { url: box.config.redisUrl }, prefix: keys.bullPrefix });
    try {
      expect(await queue.getJobCounts('wait', 'delayed', 'prioritized', 'active')).toEqual({ wait: 0, delayed: 0, prioritized: 0, active: 0 });
    } finally {
      await queue.close();
    }
  });

  it('does not withdraw an op while a worker listens on its shard, however busy: it runs when its turn comes', async () => {
    // Shard 4's only worker is busy with a job that ends when the op has waited past its pickup time.
    const keys = keysFor(box.config.prefix);
    const connection = { url: box.config.redisUrl };
    let release!: () => void;
    const blocker = new Promise<void>((resolve) => (release = resolve));
    const worker = new Worker(keys.queueName(4), async (job) => (job.name.startsWith('op:') ? { ok: true, result: { ranBy: 'busy worker' } } : blocker), {
      connection,
      prefix: keys.bullPrefix,
      concurrency: 1,
    });
    const queue = new Queue(keys.queueName(4), { connection, prefix: keys.bullPrefix });
    try {
      await worker.waitUntilReady();
      await queue.add('blocker', {});
      const answer = ops.run(4, 'ping', {}, { timeoutMs: 60_000, pickup: { noteAfterMs: 2000, timeoutMs: 1500, onUnclaimed: () => release() } });
      expect(await answer).toEqual({ ok: true, result: { ranBy: 'busy worker' } });
    } finally {
      release();
      await worker.close();
      await queue.close();
    }
  });
});
