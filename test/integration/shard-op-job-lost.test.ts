import type { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// Session 29 (F4): the fault ledger's `agentdb backup now` was still waiting 5 minutes after its
// run had ended. Redis had been killed and started again empty in under the few seconds after
// which an op answers UNAVAILABLE: its job was gone, and the look at it every second took "no
// job" for "not finished yet", so the op waited out its timeout (6 hours for a backup). No worker
// runs here: the op stays queued until Redis loses it.
let own: OwnRedis;
let sb: Sandbox;
let ops: ShardOpClient;

beforeAll(async () => {
  own = await OwnRedis.start();
  sb = sandbox({ REDIS_URL: own.url });
  ops = new ShardOpClient({ redisUrl: own.url, prefix: sb.config.prefix });
});
afterAll(async () => {
  await ops.close();
  await sb.cleanup();
  await own.remove();
});

it('an op whose job an empty Redis lost answers UNAVAILABLE, saying it may have run, instead of waiting out its timeout', async () => {
  const answered = ops.run(0, 'backup', {}, { db: 'acme/scout', timeoutMs: 120_000 }).then(
    () => undefined,
    (err: unknown) => err as { code?: string; message?: string },
  );
  const r = new Redis(own.url, { maxRetriesPerRequest: 1 });
  r.on('error', () => undefined);
  // Queued: its job is in Redis.
  while ((await r.keys(`${sb.config.prefix}:*:op.*`)).length === 0) await new Promise((res) => setTimeout(res, 20));
  r.disconnect();
  await own.kill();
  own.wipe();
  await own.start();
  const err = await answered;
  expect(err?.code).toBe('UNAVAILABLE');
  expect(err?.message).toMatch(/job is gone from Redis .* may have run/);
  // And BullMQ's wait for the job is settled: its timer (the op's timeout) held a CLI that had
  // printed this answer open until it ran out (F5: a restore, 6 minutes after answering).
  const { queues } = ops as unknown as { queues: Map<number, { events: EventEmitter }> };
  expect(
    queues
      .get(0)!
      .events.eventNames()
      .filter((e) => String(e).startsWith('failed:')),
  ).toEqual([]);
}, 30_000);
