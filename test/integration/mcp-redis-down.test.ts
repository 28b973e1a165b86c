import { afterAll, beforeAll, expect, it } from 'vitest';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import { KeyedCalls } from '../../src/calls/bearer-key-calls.ts';
import { AgentDbClient } from '../../src/calls/client.ts';
import { buildApp } from '../../src/http/app.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentKeyRing } from '../../src/registry/agent-keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { PrincipalCache } from '../../src/registry/principal-cache.ts';
import { KeyAuthenticator } from '../../src/registry/principal.ts';
import { WorkspaceRegistry } from '../../src/registry/workspaces.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// An MCP client connects with initialize, lists with tools/list and keeps the connection with
// ping. With Redis down every one of them answered HTTP 503 "Unavailable: …" under id null, so a
// client connecting or reconnecting during an outage showed the server as broken, where a tool
// call's UNAVAILABLE is a result its model reads and retries (N5's leftover, session 30).

let own: OwnRedis;
let close: () => Promise<void>;
let post: (key: string, message: object) => Promise<{ status: number; body: Record<string, unknown> | undefined }>;
let seen: string;
let unseen: string;
let principals: PrincipalCache;

beforeAll(async () => {
  own = await OwnRedis.start();
  const redis = connectRedis(own.url, { name: 'mcp-redis-down-test' });
  redis.on('error', () => undefined);
  const keys = keysFor('mrd');
  await new WorkspaceRegistry(redis, keys).put('acme', 'pro');
  const agents = new AgentRegistry(redis, keys);
  await agents.put('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
  const ring = new AgentKeyRing(redis, keys, agents);
  seen = (await ring.mint('acme', 'scout')).key;
  unseen = (await ring.mint('acme', 'scout')).key;
  const subscriber = connectRedis(own.url, { name: 'mcp-redis-down-changes' });
  subscriber.on('error', () => undefined);
  principals = new PrincipalCache(subscriber, keys.registryChanges, 60_000);
  await principals.start();
  const calls = new AgentDbClient({ redisUrl: own.url, prefix: 'mrd', shardCount: 4 });
  const members = new MemberRegistry(redis, keys);
  const approvals = new ApprovalService({ redis, prefix: 'mrd', shardCount: 4, members });
  const app = buildApp({
    redis,
    shardCount: 4,
    members,
    approvals,
    keyed: { auth: new KeyAuthenticator(redis, keys, principals), calls: new KeyedCalls(calls), waitMs: 5000, approvalWaitMs: 5000 },
  });
  post = async (key, message) => {
    const res = await app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { authorization: `Bearer ${key}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
      payload: { jsonrpc: '2.0', ...message },
    });
    return { status: res.statusCode, body: res.body ? (res.json() as Record<string, unknown>) : undefined };
  };
  close = async () => {
    await app.close();
    await approvals.close();
    await calls.close();
    principals.close();
    redis.disconnect();
  };
});
afterAll(async () => {
  await close?.();
  await own?.stop().catch(() => undefined);
});

const initialize = { method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '0' } } };
/** The call id of a tools/call answer's result. */
const callIdOf = (body: Record<string, unknown> | undefined) =>
  (body?.result as { structuredContent?: { callId?: string } } | undefined)?.structuredContent?.callId;
const toolNames = (body: Record<string, unknown> | undefined) => (body?.result as { tools?: { name: string }[] } | undefined)?.tools?.map((t) => t.name);

it('answers initialize, ping and a seen key’s tools/list with Redis down; anything else a 503 under the request’s id saying to retry', async () => {
  // The key is used once while Redis answers, as a connected client's is.
  expect(toolNames((await post(seen, { id: 1, method: 'tools/list' })).body)).toHaveLength(4);
  const lost = principals.changed();
  await own.kill();
  await lost;

  // Connecting needs nothing of the key: the server's name and capabilities are the same for all.
  for (const key of [seen, unseen]) {
    const init = await post(key, { id: 2, ...initialize });
    expect(init.status).toBe(200);
    expect(init.body).toMatchObject({ id: 2, result: { serverInfo: { name: 'agentdb' }, capabilities: { tools: {} } } });
    expect(await post(key, { method: 'notifications/initialized' })).toMatchObject({ status: 202 });
    expect(await post(key, { id: 3, method: 'ping' })).toMatchObject({ status: 200, body: { id: 3, result: {} } });
  }
  // The key seen active a moment ago lists its tools as it did.
  const listed = await post(seen, { id: 4, method: 'tools/list' });
  expect(listed.status).toBe(200);
  expect(toolNames(listed.body)).toEqual(['DATA_DESCRIBE_SCHEMA', 'DATA_QUERY_SQL', 'DATA_WRITE_SQL', 'DATA_DROP_TABLE']);
  // A key this process never saw cannot be told from a revoked one: refused for now, in words.
  const refused = await post(unseen, { id: 5, method: 'tools/list' });
  expect(refused.status).toBe(503);
  expect(refused.body).toMatchObject({ id: 5, error: { data: { code: 'UNAVAILABLE', retryable: true } } });
  const message = String((refused.body?.error as { message?: string } | undefined)?.message);
  expect(message).toBe('Service unavailable: agentdb cannot check the key now (its Redis does not answer); nothing was run. Retry in a few seconds.');
  // A tool call still needs Redis: the tool's own UNAVAILABLE, as before.
  const call = await post(seen, { id: 6, method: 'tools/call', params: { name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } } });
  expect(call.body).toMatchObject({ id: 6, result: { isError: true, structuredContent: { error: { code: 'UNAVAILABLE' }, mayStillRun: false } } });
  // Under an id made for it, as /v1/calls answers (session 31, H6: it was "", an id of no call).
  const made = callIdOf(call.body);
  expect(made).toMatch(/^[0-9a-f-]{36}$/);
  const again = await post(seen, { id: 7, method: 'tools/call', params: { name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } } });
  expect(callIdOf(again.body)).not.toBe(made);
  // Under the client's own id, that id, and it may still run (an earlier send may have reached Redis).
  const ownId = { name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' }, _meta: { 'agentdb/callId': 'mrd-1' } };
  const ownCall = await post(seen, { id: 8, method: 'tools/call', params: ownId });
  expect(ownCall.body).toMatchObject({ id: 8, result: { isError: true, structuredContent: { callId: 'mrd-1', mayStillRun: true } } });
}, 60_000);
