import { Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardLease } from '../../src/shards/shard-lease.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

let sb: Sandbox;
afterEach(() => sb.cleanup());

const settings = { database: 'agent' as const };

describe('shard leases', () => {
  it('lets exactly one holder own a shard until it lapses or is released', async () => {
    sb = sandbox();
    const redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    const a = new ShardLease(redis, keys, 'a', 300);
    const b = new ShardLease(redis, keys, 'b', 300);
    expect(await a.acquire(1)).toBe(true);
    expect(await b.acquire(1)).toBe(false);
    expect(await a.acquire(1)).toBe(true); // renewal
    await a.release(1);
    expect(await b.acquire(1)).toBe(true);
    expect(await a.acquire(1)).toBe(false);
    await b.release(1);
    redis.disconnect();
  });

  it('splits shards between two workers, and the survivor takes over when one stops', async () => {
    sb = sandbox();
    const first = await sb.pool([0, 1, 2, 3]);
    const second = await sb.pool([0, 1, 2, 3]);
    expect(first.ownedShards()).toEqual([0, 1, 2, 3]);
    expect(second.ownedShards()).toEqual([]);
    await first.stop();
    await expect.poll(() => second.ownedShards(), { timeout: 10_000 }).toEqual([0, 1, 2, 3]);
    const env = await sb.client().call({ workspace: 'w', agent: 'a', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 7' } });
    expect(env).toMatchObject({ ok: true, result: { rows: [[7]] } });
  });
});

describe('a call no worker picks up', () => {
  it('is withdrawn after the timeout with NO_WORKER, and never runs later', async () => {
    sb = sandbox();
    const client = sb.client();
    const env = await client.call(
      { workspace: 'w', agent: 'a', settings, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE late (x)' } },
      { timeoutMs: 300 },
    );
    expect(env).toMatchObject({ ok: false, error: { code: 'NO_WORKER' } });
    const keys = keysFor(sb.config.prefix);
    const counts = await Promise.all(
      [0, 1, 2, 3].map(async (shard) => {
        const q = new Queue(keys.queueName(shard), { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
        const n = await q.count();
        await q.close();
        return n;
      }),
    );
    expect(counts.reduce((a, b) => a + b, 0)).toBe(0);
  });

  it('with no wait, is queued and runs when a worker comes', async () => {
    sb = sandbox();
    const client = sb.client();
    const queued = await client.call(
      { workspace: 'w', agent: 'a', settings, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE later (x)' } },
      // With no wait the answer comes once the call has run or been parked, or after timeoutMs
      // (30 s by default) as `queued`: no worker runs here, so a short window says the same.
      { wait: false, timeoutMs: 500 },
    );
    expect(queued).toMatchObject({ ok: false, status: 'queued' });
    await sb.pool();
    // Its own answer first: a call sent after it may run beside it, on another child.
    expect(await client.result(queued.callId, { workspace: 'w', agent: 'a', wait: true })).toMatchObject({ ok: true });
    const env = await client.call({ workspace: 'w', agent: 'a', settings, tool: 'DATA_DESCRIBE_SCHEMA' });
    expect(env).toMatchObject({ ok: true, result: { tables: [{ name: 'later' }] } });
  });
});
