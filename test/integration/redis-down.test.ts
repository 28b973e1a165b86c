import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { MemberRegistry } from '../../src/registry/members.ts';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import { buildApp } from '../../src/http/app.ts';
import { AgentDbClient } from '../../src/calls/client.ts';
import { checkRedis, connectRedis } from '../../src/redis/connection.ts';
import { KeyedCalls } from '../../src/calls/bearer-key-calls.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentKeyRing } from '../../src/registry/agent-keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { KeyAuthenticator } from '../../src/registry/principal.ts';
import { WorkspaceRegistry } from '../../src/registry/workspaces.ts';
import { REDIS_URL, sandbox } from '../helpers/harness.ts';
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
    // Nothing reached Redis: the call cannot run later.
    expect(await client.call(call)).toMatchObject({ mayStillRun: false });
    // Under the caller's own id it may all the same: an earlier send of the id (this client's or
    // another's) may have reached Redis and run. Review F4: writes whose resend during the outage
    // answered false, and were given up, had committed.
    expect(await client.call({ ...call, callId: 'mine-1' })).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' }, mayStillRun: true });
  });

  it('POST /v1/calls answers 503 with the same envelope when the queue Redis does not answer', async () => {
    const sb = sandbox();
    const redis = new Redis(REDIS_URL);
    const keys = keysFor(sb.config.prefix);
    const url = `redis://127.0.0.1:${await freePort()}`;
    const calls = new AgentDbClient({ redisUrl: url, prefix: sb.config.prefix, shardCount: sb.config.shardCount });
    clients.push(calls);
    const agents = new AgentRegistry(redis, keys);
    await new WorkspaceRegistry(redis, keys).put('acme', 'pro');
    await agents.put('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
    const { key } = await new AgentKeyRing(redis, keys, agents).mint('acme', 'scout');
    const members = new MemberRegistry(redis, keys);
    const approvals = new ApprovalService({ redis, prefix: sb.config.prefix, shardCount: sb.config.shardCount, members });
    const app = buildApp({
      redis,
      shardCount: sb.config.shardCount,
      members,
      approvals,
      keyed: { auth: new KeyAuthenticator(redis, keys), calls: new KeyedCalls(calls), waitMs: 5000, approvalWaitMs: 5000 },
    });
    try {
      const res = await app.inject({
        method: 'POST',
        url: '/v1/calls',
        headers: { authorization: `Bearer ${key}` },
        payload: { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' }, callId: 'c-1' },
      });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toMatchObject({
        ok: false,
        callId: 'c-1',
        // The request's own id: an earlier send of it may have run (see above).
        mayStillRun: true,
        error: { code: 'UNAVAILABLE', message: expect.stringContaining(`Redis at ${url}`) },
      });
    } finally {
      await app.close();
      await approvals.close();
      redis.disconnect();
      await sb.cleanup();
    }
  });

  it('/v1/calls answers the call envelope, mayStillRun by whose id it is, when the key cannot be looked up either; /mcp a tool result', async () => {
    // One Redis for keys and queue, as `agentdb start` has: down, the key lookup fails first. It
    // answered a bare { error } (no callId, no mayStillRun) to a resend under the caller's own id.
    const url = `redis://127.0.0.1:${await freePort()}`;
    const redis = connectRedis(url, { name: 'redis-down-test' });
    redis.on('error', () => undefined);
    const keys = keysFor('rdk');
    const calls = new AgentDbClient({ redisUrl: url, prefix: 'rdk' });
    clients.push(calls);
    const members = new MemberRegistry(redis, keys);
    const approvals = new ApprovalService({ redis, prefix: 'rdk', shardCount: 4, members });
    const keyed = { auth: new KeyAuthenticator(redis, keys), calls: new KeyedCalls(calls), waitMs: 5000, approvalWaitMs: 5000 };
    const app = buildApp({ redis, shardCount: 4, members, approvals, keyed });
    const headers = { authorization: `Bearer adb_${'a'.repeat(43)}` };
    const post = (payload: object) => app.inject({ method: 'POST', url: '/v1/calls', headers, payload });
    const down = { ok: false, error: { code: 'UNAVAILABLE', message: expect.stringContaining(`Redis at ${url}`) } };
    try {
      const own = await post({ tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' }, callId: 'c-2' });
      expect(own.statusCode).toBe(503);
      expect(own.json()).toMatchObject({ ...down, callId: 'c-2', tool: 'DATA_WRITE_SQL', mayStillRun: true });
      const made = await post({ tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } });
      expect(made.statusCode).toBe(503);
      expect(made.json()).toMatchObject({ ...down, callId: expect.any(String), tool: 'DATA_QUERY_SQL', mayStillRun: false });
      const look = await app.inject({ method: 'GET', url: '/v1/calls/c-2', headers });
      expect(look.statusCode).toBe(503);
      expect(look.json()).toMatchObject({ ...down, callId: 'c-2', mayStillRun: true });
      // /mcp: a tools/call is the tool's UNAVAILABLE, its mayStillRun as the call's own answer has it.
      const mcp = await app.inject({
        method: 'POST',
        url: '/mcp',
        headers: { ...headers, accept: 'application/json, text/event-stream' },
        payload: {
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' }, _meta: { 'agentdb/callId': 'm-1' } },
        },
      });
      expect(mcp.json()).toMatchObject({ result: { isError: true, structuredContent: { callId: 'm-1', mayStillRun: true, error: { code: 'UNAVAILABLE' } } } });
    } finally {
      await app.close();
      await approvals.close();
      redis.disconnect();
    }
  });

  it('checkRedis rejects with the URL, its password hidden', async () => {
    const port = await freePort();
    await expect(checkRedis(`redis://:s3cret@127.0.0.1:${port}`)).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      detail: expect.stringMatching(new RegExp(`^Redis at redis://:\\*\\*\\*@127\\.0\\.0\\.1:${port} does not answer`)),
    });
  });
});
