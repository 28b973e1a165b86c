import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentDbClient } from '../../src/calls/client.ts';
import { databaseId, shardOf } from '../../src/contracts/database-id.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { publishShardCount } from '../../src/redis/service-shard-count.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// A client closed while a shard's queue was still opening (BullMQ asks Redis its version first)
// had that question fail with "Connection is closed." once the close dropped the connection:
// BullMQ then emits 'error' on a connection whose listeners its close took away, which throws
// inside a promise's handler — an unhandled rejection, which ends a Node process (an agent
// runtime, `agentdb start`). Reached by a call answered UNAVAILABLE while Redis answers nothing
// (SIGSTOP) on a shard this client had not used yet, and the client then closed. vitest fails a
// run with an unhandled rejection.

let own: OwnRedis;
const shardCount = 2;
const prefix = 'close-stalled';
const who = { workspace: 'acme', settings: { database: 'agent' as const } };
/** Two agents whose databases are on different shards. */
const agents = (() => {
  const first = 'a0';
  const shard = shardOf(databaseId(who.workspace, first), shardCount);
  for (let i = 1; ; i++) if (shardOf(databaseId(who.workspace, `a${i}`), shardCount) !== shard) return [first, `a${i}`] as const;
})();

beforeAll(async () => {
  own = await OwnRedis.start();
  // As a worker does: the client then knows the count without asking again.
  const redis = connectRedis(own.url);
  await publishShardCount(redis, keysFor(prefix), shardCount);
  redis.disconnect();
});
afterAll(async () => {
  own.signal('SIGCONT');
  await own.remove();
});

describe('a client closed while Redis answers nothing', () => {
  it('closes without an unhandled rejection when a shard queue was still opening', { timeout: 60_000 }, async () => {
    const client = new AgentDbClient({ redisUrl: own.url, prefix, shardCount });
    // Warm: the shard count, the plan and the reader are known, so the next call's first
    // question to Redis is its new shard queue's.
    const warm = { ...who, agent: agents[0], tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } } as const;
    expect(await client.call(warm, { wait: false, timeoutMs: 50 })).toMatchObject({ status: 'queued' });
    own.signal('SIGSTOP');
    const made = await client.call({ ...warm, agent: agents[1] }, { timeoutMs: 5000 });
    expect(made).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' } });
    // The connection ends while Redis still answers nothing: the queue's question fails then.
    const ended = new Promise((r) => (client as unknown as { redis: Redis }).redis.once('end', r));
    await client.close();
    await ended;
    // A rejection left unheard is reported once its promise is collected: give it a few turns.
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  });
});
