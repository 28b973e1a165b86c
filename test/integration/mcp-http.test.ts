import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// The HTTP side of POST /mcp that agentdb's own transport (src/http/mcp-exchange.ts) answers,
// as the SDK's Streamable HTTP transport answered it: the checks, their order, status codes
// and JSON-RPC codes, 202 for notifications, batches refused. No worker: nothing here runs a query.

let sb: Sandbox;
let k: KeyedApp;
let base: string;
let auth: Record<string, string>;

beforeAll(async () => {
  sb = sandbox();
  k = keyedApp(sb);
  auth = { authorization: `Bearer ${await k.agentKey('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } })}` };
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

const JSON_AND_SSE = 'application/json, text/event-stream';
const init = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};
const ping = (id: number | string) => ({ jsonrpc: '2.0', id, method: 'ping' });

async function post(body: unknown, headers: Record<string, string> = {}) {
  const r = await fetch(new URL('/mcp', base), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: JSON_AND_SSE, ...auth, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, type: r.headers.get('content-type'), text, json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

describe('POST /mcp over HTTP', () => {
  it('answers an initialize with the negotiated version, and a request with its JSON-RPC response as application/json', async () => {
    const r = await post(init);
    expect(r.status).toBe(200);
    // Exactly, as the SDK's own transport types it: JSON has no charset parameter to parse back out.
    expect(r.type).toBe('application/json');
    expect(r.json).toMatchObject({
      jsonrpc: '2.0',
      id: 1,
      result: { protocolVersion: '2025-06-18', serverInfo: { name: 'agentdb' }, capabilities: { tools: {} } },
    });
    expect(await post(ping('p'), { 'mcp-protocol-version': '2025-06-18' })).toMatchObject({ status: 200, json: { jsonrpc: '2.0', id: 'p', result: {} } });
  });

  it('refuses a client that does not accept both JSON and event streams with 406', async () => {
    for (const accept of ['application/json', 'text/event-stream', '*/*']) {
      const r = await post(ping(1), { accept });
      expect(r.status).toBe(406);
      expect(r.json).toMatchObject({ jsonrpc: '2.0', error: { code: -32000, message: expect.stringMatching(/^Not Acceptable/) }, id: null });
    }
  });

  it('parses Accept rather than searching it: a type declined with q=0, or a longer name, is not accepted', async () => {
    for (const accept of [
      'application/json;q=0, text/event-stream',
      'application/json, text/event-stream; q=0.000',
      'application/json, text/event-stream-x',
      'application/jsonx, text/event-stream',
      'text/plain; a="application/json", text/event-stream',
      'application/json;q=high, text/event-stream',
    ]) {
      const r = await post(ping(1), { accept });
      expect(r.status, accept).toBe(406);
      expect(r.json).toMatchObject({ error: { code: -32000, message: expect.stringMatching(/^Not Acceptable/) }, id: null });
    }
    for (const accept of [
      'Application/JSON; charset=utf-8, text/event-stream;q=0.5',
      'text/event-stream ,application/json;q=1.0',
      'application/json;q=0, application/json, text/event-stream',
    ]) {
      expect((await post(ping(1), { accept })).status, accept).toBe(200);
    }
  });

  it('refuses a body that is not application/json with 415, in the same words whichever layer refuses it', async () => {
    // text/plain has a Fastify parser and reaches the transport's check; application/xml and a
    // body with no content type are refused by Fastify before the route (review R28: they differed).
    const answers = [];
    for (const type of ['text/plain', 'application/xml', 'application/x-www-form-urlencoded']) {
      const r = await post(JSON.stringify(ping(1)), { 'content-type': type });
      expect(r.status, type).toBe(415);
      answers.push(r.json);
    }
    const bare = await fetch(new URL('/mcp', base), {
      method: 'POST',
      headers: { accept: JSON_AND_SSE, ...auth },
      body: new Uint8Array(Buffer.from(JSON.stringify(ping(1)))),
    });
    expect(bare.status).toBe(415);
    answers.push(await bare.json());
    expect(answers[0]).toEqual({ jsonrpc: '2.0', error: { code: -32000, message: 'Unsupported Media Type: Content-Type must be application/json' }, id: null });
    for (const a of answers) expect(a).toEqual(answers[0]);
  });

  it('refuses an unsupported MCP-Protocol-Version with 400, and takes every supported one', async () => {
    const r = await post(ping(1), { 'mcp-protocol-version': '1999-01-01' });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ error: { code: -32000, message: expect.stringContaining('Unsupported protocol version: 1999-01-01') }, id: null });
    for (const v of ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']) expect((await post(ping(1), { 'mcp-protocol-version': v })).status).toBe(200);
    // An initialize negotiates the version in its body: the header is not checked.
    expect((await post(init, { 'mcp-protocol-version': '1999-01-01' })).status).toBe(200);
  });

  it('answers notifications (and responses) alone with 202 and no body', async () => {
    for (const body of [
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 9, result: {} },
    ]) {
      const r = await post(body);
      expect(r.status).toBe(202);
      expect(r.text).toBe('');
    }
  });

  it('refuses every JSON-RPC batch with 400 (batches left MCP in 2025-06-18), one message or many', async () => {
    for (const body of [
      [ping('a')],
      [ping('a'), { jsonrpc: '2.0', id: 'b', method: 'tools/list' }],
      [{ jsonrpc: '2.0', method: 'notifications/initialized' }],
      [init],
    ]) {
      expect(await post(body)).toMatchObject({
        status: 400,
        json: { jsonrpc: '2.0', error: { code: -32600, message: expect.stringContaining('batches are not supported') }, id: null },
      });
    }
  });

  it('answers an unknown method with the JSON-RPC error of the SDK server, in a 200', async () => {
    expect(await post({ jsonrpc: '2.0', id: 4, method: 'resources/list' })).toMatchObject({
      status: 200,
      json: { jsonrpc: '2.0', id: 4, error: { code: -32601 } },
    });
  });

  it('refuses what is not JSON-RPC with 400', async () => {
    for (const body of [{ hello: 'world' }, { jsonrpc: '1.0', id: 2, method: 'ping' }, 42]) {
      expect(await post(body)).toMatchObject({ status: 400, json: { error: { code: -32700, message: 'Parse error: Invalid JSON-RPC message' }, id: null } });
    }
  });
});
