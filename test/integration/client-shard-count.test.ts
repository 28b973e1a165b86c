import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientShardCount, DEFAULT_SHARD_COUNT } from '../../src/calls/client-shard-count.ts';
import { databaseId, shardOf } from '../../src/contracts/database-id.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { publishShardCount } from '../../src/redis/service-shard-count.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

let sb: Sandbox;
const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');

// An agent whose database lies on a shard of 16 that a service of 8 has no queue for: a client
// that guessed 16 would enqueue where nobody serves.
const agent = Array.from({ length: 64 }, (_, i) => `sc${i}`).find((a) => shardOf(databaseId('acme', a), 16) >= 8)!;
const select = { workspace: 'acme', agent, settings: { database: 'agent' as const }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 7' } };

beforeAll(async () => {
  sb = sandbox({ SHARD_COUNT: '8' });
  await sb.pool();
});
afterAll(async () => {
  await sb.cleanup();
  redis.disconnect();
});

describe("the client follows the service's SHARD_COUNT", () => {
  it('runs calls on a service of 8 shards when not given shardCount', async () => {
    const client = sb.client({ shardCount: undefined });
    const env = await client.call(select, { timeoutMs: 10_000 });
    expect(env).toMatchObject({ ok: true, result: { rows: [[7]] } });
  });

  it('answers CONFIG_MISMATCH, naming both counts, when given another shardCount, and sends nothing', async () => {
    const client = sb.client({ shardCount: 4 });
    const callId = `mismatch-${randomUUID()}`;
    const env = await client.call({ ...select, callId }, { timeoutMs: 10_000 });
    expect(env).toMatchObject({ ok: false, error: { code: 'CONFIG_MISMATCH', message: expect.stringMatching(/runs 8 shards.*given shardCount 4/) } });
    // Said once: the registry's sentence says it, the detail only names the counts (review N10).
    expect(env.ok ? [] : env.error.message.match(/nothing was sent/g)).toHaveLength(1);
    const who = { workspace: 'acme', agent };
    expect(await client.result(callId, who)).toMatchObject({ ok: false, error: { code: 'CONFIG_MISMATCH' } });
    expect(await sb.client().result(callId, who)).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
  });

  it('assumes 16 while no worker has published, and reads the count once one has', async () => {
    const keys = keysFor(`t-sc-${randomUUID().slice(0, 12)}`);
    try {
      const unset = new ClientShardCount(redis, keys, undefined);
      expect(await unset.resolve()).toEqual({ ok: true, count: DEFAULT_SHARD_COUNT });
      const given = new ClientShardCount(redis, keys, 16);
      expect(await given.resolve()).toEqual({ ok: true, count: 16 });
      await publishShardCount(redis, keys, 8);
      expect(await unset.resolve()).toEqual({ ok: true, count: 8 });
      expect(await given.resolve()).toMatchObject({ ok: false, detail: expect.stringContaining('runs 8 shards') });
    } finally {
      await redis.del(keys.shardCount);
    }
  });

  it('keeps the count it read for a warm call (known, no await) until forgotten, and sees a new one then', async () => {
    const keys = keysFor(`t-sc-${randomUUID().slice(0, 12)}`);
    try {
      const given = new ClientShardCount(redis, keys, 8);
      // Nothing published: nothing kept, each call asks Redis.
      expect(await given.resolve()).toEqual({ ok: true, count: 8 });
      expect(given.known()).toBeUndefined();
      await publishShardCount(redis, keys, 8);
      expect(await given.resolve()).toEqual({ ok: true, count: 8 });
      expect(given.known()).toEqual({ ok: true, count: 8 });
      // The service restarted with another count: kept as before until a call no worker took.
      await publishShardCount(redis, keys, 4);
      expect(given.known()).toEqual({ ok: true, count: 8 });
      given.forget();
      expect(given.known()).toBeUndefined();
      expect(await given.resolve()).toMatchObject({ ok: false, detail: expect.stringContaining('runs 4 shards') });
      expect(given.known()).toMatchObject({ ok: false, detail: expect.stringContaining('runs 4 shards') });
    } finally {
      await redis.del(keys.shardCount);
    }
  });
});
