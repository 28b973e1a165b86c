import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import type { Envelope } from '../../src/contracts/envelope.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { infoField } from '../../src/redis/memory-headroom.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// Issue 27: with `maxmemory 760mb noeviction` filled, another workspace's INSERT answered
// INTERNAL and the worker dropped every shard lease. Here a Redis of 48 MB, filled past the 20%
// kept free, refuses new calls in words while leases go on being renewed.
const MAX = 48 * 1024 * 1024;
let own: OwnRedis;
let sb: Sandbox;
let pool: ShardWorkerPool;
let client: AgentDbClient;
let admin: ReturnType<typeof connectRedis>;

beforeAll(async () => {
  own = await OwnRedis.start();
  admin = connectRedis(own.url);
  await admin.config('SET', 'maxmemory', String(MAX));
  await admin.config('SET', 'maxmemory-policy', 'noeviction');
  sb = sandbox({ REDIS_URL: own.url });
  pool = await sb.pool();
  client = sb.client();
});
afterAll(async () => {
  await sb.cleanup();
  admin.disconnect();
  await own.remove();
});

const quiet = { workspace: 'quiet', agent: 'scout', settings: { database: 'agent' as const } };
const used = async () => infoField(await admin.info('memory'), 'used_memory');

describe('a Redis near its maxmemory', () => {
  it('refuses new calls with UNAVAILABLE before it is full; leases are still renewed; calls come back once it has room', async () => {
    expect(await client.call({ ...quiet, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } })).toMatchObject({ ok: true });
    const owned = pool.ownedShards();
    expect(owned.length).toBe(sb.config.shardCount);

    // Filled to 88% of maxmemory by someone else: one big value, as a hostile tenant's results were.
    // In pieces of 512 KiB: one value this large would fill Redis's query buffer first.
    const piece = Buffer.alloc(512 * 1024, 'x');
    let n = 0;
    while ((await used()) < MAX * 0.88) await admin.set(`filler:${n++}`, piece);
    let refused: Envelope | undefined;
    // Redis's memory is read afresh now and then, not for every call: the writes sent before it
    // is seen near full run (each once), and are counted here.
    let ranBefore = 0;
    await expect
      .poll(async () => {
        refused = (await client.call({ ...quiet, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (1)' } })) as Envelope;
        if (refused.ok) ranBefore++;
        return refused.ok ? 'ran' : refused.error.code;
      })
      .toBe('UNAVAILABLE');
    if (!refused || refused.ok) throw new Error('unreachable');
    expect(refused.error.message).toMatch(/Redis holds \d+ bytes of its maxmemory 50331648, past the 20% kept free .*\(REDIS_MEMORY_HEADROOM_PERCENT\)/);
    // Counted where the client refused it, for a library-only runtime as for `agentdb start`'s /metrics.
    expect(await client.metrics.text()).toMatch(/^agentdb_quota_refusals_total\{quota="headroom"\} [1-9]/m);

    // The shard leases are renewed meanwhile: Redis still takes their writes.
    const lease = keysFor(sb.config.prefix).lease(owned[0]!);
    const before = Number(await admin.call('PEXPIRETIME', lease));
    await expect.poll(async () => Number(await admin.call('PEXPIRETIME', lease))).toBeGreaterThan(before);
    expect(pool.ownedShards()).toEqual(owned);
    expect(await used()).toBeLessThan(MAX);

    // Room again: the same call runs, once.
    await admin.del(...Array.from({ length: n }, (_, i) => `filler:${i}`));
    await expect
      .poll(async () => {
        const env = (await client.call({ ...quiet, callId: 'after-room', tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (2)' } })) as Envelope;
        return env.ok;
      })
      .toBe(true);
    const rows = (await client.call({ ...quiet, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT x FROM t' } })) as Envelope;
    expect(rows).toMatchObject({ ok: true, result: { rows: [...Array.from({ length: ranBefore }, () => [1]), [2]] } });
  });
});
