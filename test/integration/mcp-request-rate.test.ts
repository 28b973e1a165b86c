import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Session 31, T8 left it, session 32, T9 closed it: on /mcp, initialize, tools/list, ping,
// notifications and methods not served were counted nowhere, so one key spun tools/list at 233 a
// second (1.4 ms of the server's CPU each) or ping at 1,049, for free. They are counted now in a
// bucket of each principal's own (MCP_REQUESTS_PER_MINUTE): past it -32600 RATE_LIMITED with the
// seconds to wait, as a task follow-up's refusal, and another key, or the same key's calls, spend
// nothing of it.

let sb: Sandbox;
let k: KeyedApp;
let spinner: string;
let other: string;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  // Five such requests a key per window; calls as the plan has them.
  k = keyedApp(sb, { rateLimits: { windowS: 600, mcpRequests: 5 } });
  spinner = await k.agentKey('spins', 'spinner', { displayName: 'Spinner', settings: { database: 'agent' } });
  other = await k.agentKey('spins', 'other', { displayName: 'Other', settings: { database: 'agent' } });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

async function post(key: string, message: object): Promise<{ status: number; retryAfter?: string; body: Record<string, unknown> | undefined }> {
  const res = await k.app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    payload: { jsonrpc: '2.0', ...message },
  });
  const retryAfter = res.headers['retry-after'];
  return {
    status: res.statusCode,
    ...(retryAfter !== undefined ? { retryAfter: String(retryAfter) } : {}),
    body: res.body ? (res.json() as Record<string, unknown>) : undefined,
  };
}

const initialize = { method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '0' } } };

it('counts initialize, tools/list, ping, notifications and unserved methods per key, and refuses past the bound with RATE_LIMITED and when to ask again', async () => {
  expect((await post(spinner, { id: 1, ...initialize })).body).toMatchObject({ id: 1, result: { serverInfo: { name: 'agentdb' } } });
  expect(await post(spinner, { method: 'notifications/initialized' })).toMatchObject({ status: 202 });
  expect((await post(spinner, { id: 2, method: 'tools/list' })).body).toMatchObject({ id: 2, result: { tools: expect.any(Array) } });
  expect((await post(spinner, { id: 3, method: 'ping' })).body).toMatchObject({ id: 3, result: {} });
  // A method the server does not serve costs the same to ask.
  expect((await post(spinner, { id: 4, method: 'resources/list' })).body).toMatchObject({ id: 4, error: { code: -32601 } });

  for (const [id, method] of [
    [5, 'tools/list'],
    [6, 'ping'],
    [7, 'initialize'],
    // A task method not served is no task request.
    [10, 'tasks/nope'],
  ] as const) {
    const refused = await post(spinner, method === 'initialize' ? { id, ...initialize } : { id, method });
    expect(refused.status).toBe(200);
    expect(refused.retryAfter).toMatch(/^\d+$/);
    expect(refused.body).toMatchObject({
      id,
      error: {
        code: -32600,
        message: expect.stringMatching(/RATE_LIMITED: .* ask again in \d+ s\.$/),
        data: { code: 'RATE_LIMITED', retryAfter: expect.any(Number) },
      },
    });
  }
  // A notification has no response to carry it: HTTP says so.
  const note = await post(spinner, { method: 'notifications/initialized' });
  expect(note.status).toBe(429);
  expect(note.body).toMatchObject({ id: null, error: { data: { code: 'RATE_LIMITED' } } });

  // Another key's requests are its own; the key's calls are not spent by its spinning.
  expect((await post(other, { id: 8, method: 'tools/list' })).body).toMatchObject({ id: 8, result: { tools: expect.any(Array) } });
  const call = await post(spinner, { id: 9, method: 'tools/call', params: { name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1 AS one' } } });
  expect(call.body).toMatchObject({ id: 9, result: { isError: false } });
});
