import { afterAll, describe, expect, it } from 'vitest';
import { AgentDbClient } from '../../src/queue/client.ts';
import { checkRedis } from '../../src/queue/connection.ts';
import { freePort } from '../helpers/own-redis.ts';

// A client pointed at a port nothing listens on must answer, not hang: BullMQ waits for a
// Redis that is down without a word, and every command used to retry for 18 s first.
const clients: AgentDbClient[] = [];
afterAll(() => Promise.all(clients.map((c) => c.close())));

describe('the client library when Redis does not answer', () => {
  it('answers calls, results and decisions with UNAVAILABLE naming the URL', async () => {
    const url = `redis://127.0.0.1:${await freePort()}`;
    const client = new AgentDbClient({ redisUrl: url, prefix: 'down' });
    clients.push(client);
    const call = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } };
    const unavailable = { ok: false, error: { code: 'UNAVAILABLE', message: expect.stringContaining(`Redis at ${url} does not answer`) } };
    expect(await client.call(call)).toMatchObject(unavailable);
    // Later calls (a batch) get the same answer without waiting for Redis again.
    const many = await Promise.all(Array.from({ length: 20 }, () => client.call(call, { wait: false })));
    for (const answer of many) expect(answer).toMatchObject(unavailable);
    expect(await client.result('some-call', { workspace: 'acme', agent: 'scout', wait: true })).toMatchObject(unavailable);
    expect(await client.decide('ap_x', { decision: 'approve', by: 'ada', operator: true })).toMatchObject({ ok: false, code: 'UNAVAILABLE' });
  });

  it('checkRedis rejects with the URL, its password hidden', async () => {
    const port = await freePort();
    await expect(checkRedis(`redis://:s3cret@127.0.0.1:${port}`)).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      detail: expect.stringMatching(new RegExp(`^Redis at redis://:\\*\\*\\*@127\\.0\\.0\\.1:${port} does not answer`)),
    });
  });
});
