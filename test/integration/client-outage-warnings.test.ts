import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AgentDbClient } from '../../src/calls/client.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// A tester's runtime printed `MaxListenersExceededWarning: 4 ready listeners added to
// [Commander]. MaxListeners is 3` during every Redis outage. The client's connection, shared by
// its shard queues, had its limit lifted with setMaxListeners(0); BullMQ raises a connection's
// limit by 3 for each queue on it, which made "no limit" a limit of 3, and the reconnect's own
// `once('ready')` went past it.
let own: OwnRedis;
const warnings: Error[] = [];
const onWarning = (w: Error) => warnings.push(w);

beforeAll(async () => {
  own = await OwnRedis.start();
  process.on('warning', onWarning);
});

beforeEach(() => {
  warnings.length = 0;
});

afterAll(async () => {
  process.off('warning', onWarning);
  await own.remove();
});

describe('the client library during a Redis outage', () => {
  it('answers 8 concurrent calls UNAVAILABLE without a MaxListenersExceededWarning', async () => {
    const client = new AgentDbClient({ redisUrl: own.url, prefix: `t-warn-${process.pid}`, shardCount: 4 });
    const call = (i: number) => ({
      workspace: 'acme',
      agent: 'writer',
      callId: `w${i}`,
      settings: { database: 'agent' as const },
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT 1' },
    });
    try {
      // One database, so one shard queue on the client's connection (no worker runs: it stays queued).
      expect(await client.call(call(0), { wait: false, timeoutMs: 100 })).toMatchObject({ status: 'queued' });
      await own.kill();
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => client.call(call(i + 1), { wait: false })));
      for (const a of answers) expect(a).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' } });
      // A reconnect attempt is made while they wait; let one more go by before looking.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.map((w) => w.message)).toEqual([]);
    } finally {
      await client.close();
      await own.start();
    }
  }, 30_000);
});
