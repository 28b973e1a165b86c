import { afterAll, beforeAll, expect, it } from 'vitest';
import { AgentDbClient } from '../../src/calls/client.ts';
import { OwnRedis } from '../../test/helpers/own-redis.ts';

// H3 (medium; not fixed). GET /v1/calls/:id (AgentDbClient.result) is never rate-limited
// (docs: "a call that has gone back to being looked up is not counted"), and a call id with no
// claim (a generated id, or one that never existed) is looked for in every shard's queue: 17
// Redis commands per lookup. Measured against `agentdb start` with one agent key: 3,000 GETs of
// unknown ids in 5.2 s (577/s from one client, 20 at a time), all 404, 17.0 Redis commands each,
// Redis at 9,960 commands/s (baseline 132) — 29× what a key may make in calls (600/min = 10/s
// → 170 commands/s at most through calls' lookups of one's own ids). Another workspace notices:
// its POST /v1/calls of SELECT 1 (200 in a row) took p50 13.8 ms / p99 113 ms idle, and p50
// 65.6 ms / p99 500 ms while one evil agent key made 304 unknown-id GETs/s over 40 connections;
// the same 40 connections sending POST /v1/calls instead (refused RATE_LIMITED from memory,
// 196/s) left it at p50 11.9 ms / p99 378 ms (2-core machine shared with other work: noisy).
// Here on a Redis of its own.
let redis: OwnRedis;
beforeAll(async () => {
  redis = await OwnRedis.start();
});
afterAll(async () => {
  await redis.stop();
});

it('looking up unknown call ids is rate-limited like calls, or costs Redis O(1)', async () => {
  const client = new AgentDbClient({ redisUrl: redis.url, prefix: 'h3', rateLimits: { windowS: 60, keyCalls: 10, workspaceCalls: 10 } });
  const admin = new (await import('ioredis')).Redis(redis.url);
  try {
    await client.result('warm-up', { workspace: 'evil', agent: 'a1' });
    const before = Number((await admin.info('stats')).match(/total_commands_processed:(\d+)/)![1]);
    const answers = [];
    for (let i = 0; i < 100; i++) answers.push(await client.result(`nope-${i}`, { workspace: 'evil', agent: 'a1' }));
    const after = Number((await admin.info('stats')).match(/total_commands_processed:(\d+)/)![1]);
    const perLookup = (after - before - 1) / 100;
    const limited = answers.filter((a) => !a.ok && 'error' in a && a.error.code === 'RATE_LIMITED').length;
    // 100 lookups against a budget of 10 calls: either most are refused, or each costs little.
    expect({ perLookup, limited }).toSatisfy(({ perLookup, limited }: { perLookup: number; limited: number }) => limited >= 90 || perLookup <= 2);
  } finally {
    admin.disconnect();
    await client.close();
  }
});
