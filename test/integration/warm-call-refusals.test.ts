import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentDbClient } from '../../src/calls/client.ts';
import type { CallInput } from '../../src/contracts/call.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { publishShardCount } from '../../src/redis/service-shard-count.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// Issue 31: a warm call (Redis up, the shard count read, plan and headroom fresh, queue and
// events reader ready) checks what the client keeps without an await before its one script.
// Each refusal must still come: on a client warmed by calls made just before, rates and the
// budget refuse before anything is queued, a Redis near its maxmemory refuses once read again,
// and a Redis gone answers UNAVAILABLE with nothing sent. No worker runs: calls answer queued.

const PREFIX = 'warm-refusals';
let own: OwnRedis;
let admin: ReturnType<typeof connectRedis>;
const clients: AgentDbClient[] = [];
const select = (agent: string, callId?: string): CallInput => ({
  workspace: 'acme',
  agent,
  settings: { database: 'agent' },
  tool: 'DATA_QUERY_SQL',
  arguments: { sql: 'SELECT 1' },
  ...(callId ? { callId } : {}),
});
const queued = { wait: false, timeoutMs: 50 } as const;
const client = (opts: ConstructorParameters<typeof AgentDbClient>[0] = {}) => {
  const c = new AgentDbClient({ redisUrl: own.url, prefix: PREFIX, shardCount: 2, ...opts });
  clients.push(c);
  return c;
};
/** Jobs waiting on every shard queue of the prefix. */
const jobsQueued = async () => {
  const lists = await admin.keys('*:wait');
  const lengths = await Promise.all(lists.map((k) => admin.llen(k)));
  return lengths.reduce((a, b) => a + b, 0);
};

beforeAll(async () => {
  own = await OwnRedis.start();
  admin = connectRedis(own.url);
  // As a worker would: the count read once and kept, so the warm path is fully warm.
  await publishShardCount(admin, keysFor(PREFIX), 2);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  admin.disconnect();
  await own.remove();
});

describe('a warm call still meets every refusal', () => {
  it('is refused by its rate once spent, with nothing more queued', async () => {
    const c = client({ rateLimits: { windowS: 600, workspaceCalls: 3 } });
    for (let i = 0; i < 3; i++) expect(await c.call(select('rate'), queued)).toMatchObject({ status: 'queued' });
    const before = await jobsQueued();
    expect(await c.call(select('rate'), queued)).toMatchObject({ ok: false, error: { code: 'RATE_LIMITED' } });
    expect(await jobsQueued()).toBe(before);
  });

  it('is refused by the workspace budget once held, with nothing more queued', async () => {
    const c = client({ rateLimits: false, redisBytesPerWorkspace: 400_000 });
    const big = (): CallInput => ({ ...select('budget'), workspace: 'budgeted', arguments: { sql: `SELECT '${'x'.repeat(1500)}'` } });
    let answer = await c.call(big(), queued);
    for (let i = 0; i < 20 && !('error' in answer); i++) answer = await c.call(big(), queued);
    expect(answer).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
    const before = await jobsQueued();
    expect(await c.call(big(), queued)).toMatchObject({ ok: false, error: { code: 'QUOTA_EXCEEDED' } });
    expect(await jobsQueued()).toBe(before);
  });

  it('is refused by the headroom once Redis is read near its maxmemory, and runs again once it has room', async () => {
    const c = client({ rateLimits: false });
    expect(await c.call(select('headroom'), queued)).toMatchObject({ status: 'queued' });
    const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
    await admin.config('SET', 'maxmemory', String(used + 64 * 1024));
    try {
      // The last reading stands half a second: then the warm call reads it again.
      await new Promise((r) => setTimeout(r, 600));
      expect(await c.call(select('headroom'), queued)).toMatchObject({
        ok: false,
        error: { code: 'UNAVAILABLE', message: expect.stringContaining('maxmemory') },
      });
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    await new Promise((r) => setTimeout(r, 600));
    expect(await c.call(select('headroom'), queued)).toMatchObject({ status: 'queued' });
  });

  it('answers UNAVAILABLE, nothing sent, once the Redis it was warm on is gone', { timeout: 30_000 }, async () => {
    const c = client({ rateLimits: false });
    for (let i = 0; i < 3; i++) expect(await c.call(select('gone'), queued)).toMatchObject({ status: 'queued' });
    await own.stop();
    try {
      // The connection's close is heard within a moment; from then on a call is answered at once.
      await expect
        .poll(async () => c.call(select('gone', `gone-${Date.now()}`), queued), { timeout: 10_000, interval: 100 })
        .toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' } });
      // Answered by the check made before anything is sent (it asks Redis, refused), not by the
      // outage watch seconds later ("the connection dropped 3 s ago"), as a warm call that
      // skipped the check would be. Nothing was sent: under an id made for the call that is
      // "nothing will run"; under the caller's own id an earlier send of it may have (review F4).
      expect(await c.call(select('gone'), queued)).toMatchObject({
        ok: false,
        error: { code: 'UNAVAILABLE', message: expect.stringContaining('ECONNREFUSED') },
        mayStillRun: false,
      });
      expect(await c.call(select('gone', 'gone-after'), queued)).toMatchObject({
        ok: false,
        error: { code: 'UNAVAILABLE', message: expect.stringContaining('ECONNREFUSED') },
        mayStillRun: true,
      });
    } finally {
      await own.start();
    }
  });
});
