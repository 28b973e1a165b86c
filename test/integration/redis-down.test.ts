import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { MemberRegistry } from '../../src/registry/members.ts';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import { buildApp } from '../../src/http/app.ts';
import { AgentDbClient } from '../../src/calls/client.ts';
import { checkRedis } from '../../src/redis/connection.ts';
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

  it('POST /v1/calls answers the envelope, mayStillRun under an own id, when Redis fails while the key is checked', async () => {
    // A key not yet cached, checked against a Redis that is gone: the request failed before
    // its body was read, and answered a bare 503 UNAVAILABLE without mayStillRun, which says
    // nothing ran, for an id whose earlier send may have (review F5).
    const sb = sandbox();
    const live = new Redis(REDIS_URL);
    const keys = keysFor(sb.config.prefix);
    const agents = new AgentRegistry(live, keys);
    await new WorkspaceRegistry(live, keys).put('acme', 'pro');
    await agents.put('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
    const { key } = await new AgentKeyRing(live, keys, agents).mint('acme', 'scout');
    const url = `redis://127.0.0.1:${await freePort()}`;
    const gone = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
    gone.on('error', () => undefined);
    const calls = new AgentDbClient({ redisUrl: url, prefix: sb.config.prefix, shardCount: sb.config.shardCount });
    clients.push(calls);
    const members = new MemberRegistry(gone, keys);
    const approvals = new ApprovalService({ redis: gone, prefix: sb.config.prefix, shardCount: sb.config.shardCount, members });
    const app = buildApp({
      redis: gone,
      shardCount: sb.config.shardCount,
      members,
      approvals,
      keyed: { auth: new KeyAuthenticator(gone, keys), calls: new KeyedCalls(calls), waitMs: 5000, approvalWaitMs: 5000 },
    });
    const post = (payload: object) => app.inject({ method: 'POST', url: '/v1/calls', headers: { authorization: `Bearer ${key}` }, payload });
    try {
      const own = await post({ tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (1)' }, callId: 'w-1' });
      expect(own.statusCode).toBe(503);
      expect(own.json()).toMatchObject({ ok: false, callId: 'w-1', tool: 'DATA_WRITE_SQL', mayStillRun: true, error: { code: 'UNAVAILABLE' } });
      // Without an id of its own nothing of it reached Redis, and nothing else can run it.
      const none = await post({ tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (1)' } });
      expect(none.statusCode).toBe(503);
      expect(none.json()).toMatchObject({ ok: false, mayStillRun: false, error: { code: 'UNAVAILABLE' } });
      // /mcp answered a JSON-RPC error, without mayStillRun: a tool error with it under an own id.
      const mcp = await app.inject({
        method: 'POST',
        url: '/mcp',
        headers: { authorization: `Bearer ${key}`, accept: 'application/json, text/event-stream' },
        payload: {
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (1)' }, _meta: { 'agentdb/callId': 'w-2' } },
        },
      });
      expect(mcp.json()).toMatchObject({ result: { isError: true, structuredContent: { mayStillRun: true, error: { code: 'UNAVAILABLE' } } } });
    } finally {
      await app.close();
      await approvals.close();
      gone.disconnect();
      live.disconnect();
      await sb.cleanup();
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
