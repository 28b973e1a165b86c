import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// No worker runs here: every call stays queued, so each request waits out its whole bound. The
// client's own pick-up wait is 30 s; this file's deadline is well under it, so a request that
// waited for pick-up past HTTP_WAIT_MS fails by the test's deadline (issue 27: a POST with
// HTTP_WAIT_MS=2000 answered after 32 s).
const DEADLINE_MS = 15_000;

let sb: Sandbox;
let k: KeyedApp;
let key: string;

beforeAll(async () => {
  sb = sandbox();
  k = keyedApp(sb, { waitMs: 300, approvalWaitMs: 300 });
  key = await k.agentKey('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

const post = (body: unknown, query = '') =>
  k.app.inject({ method: 'POST', url: `/v1/calls${query}`, headers: { authorization: `Bearer ${key}` }, payload: body as object });

describe('the wait of a call no worker has picked up', () => {
  it('is bounded by HTTP_WAIT_MS: POST answers 202 "queued", to be asked again by call id', { timeout: DEADLINE_MS }, async () => {
    const answer = await post({ tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' }, callId: 'unpicked-1' });
    expect(answer.statusCode).toBe(202);
    expect(answer.json()).toMatchObject({ ok: false, callId: 'unpicked-1', status: 'queued' });
    const again = await k.app.inject({ method: 'GET', url: '/v1/calls/unpicked-1', headers: { authorization: `Bearer ${key}` } });
    expect(again.json()).toMatchObject({ status: 'queued' });
  });

  it('is bounded by HTTP_WAIT_MS with ?wait=false too', { timeout: DEADLINE_MS }, async () => {
    const answer = await post({ tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 2' }, callId: 'unpicked-2' }, '?wait=false');
    expect(answer.statusCode).toBe(202);
    expect(answer.json()).toMatchObject({ ok: false, callId: 'unpicked-2', status: 'queued' });
  });

  it('is bounded by the MCP wait for an MCP tools/call', { timeout: DEADLINE_MS }, async () => {
    const answer = await k.app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { authorization: `Bearer ${key}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 3' } } },
    });
    expect(answer.statusCode).toBe(200);
    expect(answer.body).toContain('queued');
  });
});
