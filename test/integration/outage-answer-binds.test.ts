import { Job, Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentDbClient } from '../../src/calls/client.ts';
import { callKey } from '../../src/contracts/call-identity.ts';
import { databaseId, shardOf } from '../../src/contracts/database-id.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// Review R28 (high): Redis killed mid-call and restarted empty. The call was answered UNAVAILABLE
// with mayStillRun false, while its work, waiting on commands ioredis keeps for a Redis that
// comes back, went on once Redis was back and enqueued it: a worker then ran a write its caller
// was told had not been sent.
let own: OwnRedis;
let client: AgentDbClient;
const prefix = 'outage-binds';
beforeAll(async () => {
  own = await OwnRedis.start();
  client = new AgentDbClient({ redisUrl: own.url, prefix, shardCount: 2 });
});
afterAll(async () => {
  await client.close();
  await own.remove();
});

describe('an UNAVAILABLE answer binds the call', () => {
  it('a call answered "not sent" (mayStillRun false) is never enqueued once Redis is back', async () => {
    const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
    // Warm: the connection is ready and the service's shard count is known.
    expect(await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } }, { wait: false, timeoutMs: 50 })).toMatchObject({
      status: 'queued',
    });
    const killed = own.kill();
    // Started in the same turn as the kill: the connection still reads ready, so the call goes
    // past its first check and waits on commands that sit in ioredis's offline queue.
    const answer = await client.call(
      { ...who, callId: 'w-1', tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } },
      { wait: false, timeoutMs: 50 },
    );
    await killed;
    expect(answer).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' } });
    own.wipe();
    await own.start();
    // Another call on the same connection, enqueued after Redis is back: the first call's
    // commands were queued before its own, so its work has gone as far as it will.
    expect(
      await client.call({ ...who, callId: 'after', tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 2' } }, { wait: false, timeoutMs: 50 }),
    ).toMatchObject({
      status: 'queued',
    });
    const keys = keysFor(prefix);
    const conn = connectRedis(own.url);
    const queue = new Queue(keys.queueName(shardOf(databaseId('acme', 'scout'), 2)), { connection: conn, prefix: keys.bullPrefix });
    try {
      expect(await Job.fromId(queue, callKey('acme', 'scout', 'after'))).toBeDefined();
      const first = await Job.fromId(queue, callKey('acme', 'scout', 'w-1'));
      // Either it says it may still run, or it never reaches the queue.
      if ('mayStillRun' in answer && answer.mayStillRun === false) expect(first).toBeUndefined();
      else expect(answer).toMatchObject({ mayStillRun: true });
    } finally {
      await queue.close();
      conn.disconnect();
    }
  });
});
