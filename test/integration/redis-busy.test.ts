import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AgentDbClient } from '../../src/calls/client.ts';
import { REDIS_ANSWER_MS } from '../../src/calls/outage-answers.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// Review R1 (session 24): a burst of 4,000 calls from one client answered 3,142 of them
// UNAVAILABLE "connected but did not answer the call's enqueue within 6 s" while Redis answered
// every command in its turn. The bound is for a Redis that answers nothing (SIGSTOP:
// redis-stopped.test.ts); a busy one is waited for.

let own: OwnRedis;
let client: AgentDbClient;
beforeAll(async () => {
  own = await OwnRedis.start();
  client = new AgentDbClient({ redisUrl: own.url, prefix: 'redis-busy', shardCount: 2, rateLimits: false });
});
afterAll(async () => {
  await client.close();
  await own.remove();
});

it('queues a call whose enqueue waits behind longer than the bound for a Redis that answers all along', { timeout: 60_000 }, async () => {
  const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
  // Connected, and the call's first look-ups cached, before Redis gets busy.
  expect(await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } }, { wait: false, timeoutMs: 50 })).toMatchObject({
    status: 'queued',
  });
  // Ahead of the call on its own connection, 1.5 times the bound of waiting, answered a piece
  // every 0.3 s: a connection's commands are answered in order, and a blocking one holds the rest.
  const connection = (client as unknown as { redis: Redis }).redis;
  const pieces = Math.ceil((1.5 * REDIS_ANSWER_MS) / 300);
  const busy = Array.from({ length: pieces }, () => connection.blpop('redis-busy:nothing', 0.3));
  const answer = await client.call(
    { ...who, callId: 'behind', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } },
    { wait: false, timeoutMs: 50 },
  );
  expect(answer).toMatchObject({ callId: 'behind', status: 'queued' });
  expect(await Promise.all(busy)).toEqual(Array(pieces).fill(null));
});
