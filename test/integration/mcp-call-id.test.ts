import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Issue 25 part 5: a call id is its caller's idempotency key on every surface. MCP tools/call
// had none: an MCP client that lost an answer could only send the call again as a new call (and
// write twice). It names one in the request's `_meta` under "agentdb/callId".

let sb: Sandbox;
let k: KeyedApp;
let base: string;
let key: string;
const clients: Client[] = [];

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  k = keyedApp(sb);
  key = await k.agentKey('acme', 'mcpid', { displayName: 'Mcp id', settings: { database: 'agent' } });
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await k.close();
  await sb.cleanup();
});

async function connect(): Promise<Client> {
  const client = new Client({ name: 'agentdb-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', base), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  clients.push(client);
  return client;
}

type Result = { content: { type: string; text: string }[]; structuredContent?: Record<string, unknown>; isError?: boolean };
const call = async (c: Client, name: string, args: Record<string, unknown>, callId?: unknown) =>
  (await c.callTool({ name, arguments: args, ...(callId !== undefined ? { _meta: { 'agentdb/callId': callId } } : {}) })) as Result;

async function rows(c: Client): Promise<unknown[]> {
  const r = await call(c, 'DATA_QUERY_SQL', { sql: 'SELECT v FROM t ORDER BY rowid' });
  return r.structuredContent!.rows as unknown[];
}

describe('an MCP call id in _meta["agentdb/callId"]', () => {
  it('sent again with the same call answers the first outcome and writes once; another call under it is IDEMPOTENCY_CONFLICT', async () => {
    const c = await connect();
    await call(c, 'DATA_WRITE_SQL', { sql: 'CREATE TABLE t (v TEXT)' });
    const first = await call(c, 'DATA_WRITE_SQL', { sql: 'INSERT INTO t (v) VALUES (?)', params: ['a'] }, 'mcp-1');
    expect(first).toMatchObject({ isError: false, structuredContent: { callId: 'mcp-1', changes: 1 } });
    // A client that lost the answer (a dropped connection, a restart) sends it again: a new session.
    const again = await call(await connect(), 'DATA_WRITE_SQL', { sql: 'INSERT INTO t (v) VALUES (?)', params: ['a'] }, 'mcp-1');
    expect(again.structuredContent).toEqual(first.structuredContent);
    expect(await rows(c)).toEqual([['a']]);

    const other = await call(c, 'DATA_WRITE_SQL', { sql: 'INSERT INTO t (v) VALUES (?)', params: ['b'] }, 'mcp-1');
    expect(other.isError).toBe(true);
    expect(other.structuredContent).toMatchObject({
      callId: 'mcp-1',
      error: { code: 'IDEMPOTENCY_CONFLICT', message: expect.stringContaining('arguments.params') },
    });
    expect(other.content[0]!.text).toMatch(/^IDEMPOTENCY_CONFLICT\n/);
    const drop = await call(c, 'DATA_DROP_TABLE', { table: 't' }, 'mcp-1');
    expect(drop.structuredContent).toMatchObject({ error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(await rows(c)).toEqual([['a']]);

    // The id keeps answering the first call, on the HTTP surface too (the same caller's key).
    const byId = await fetch(new URL('/v1/calls/mcp-1', base), { headers: { authorization: `Bearer ${key}` } });
    expect(await byId.json()).toMatchObject({ ok: true, callId: 'mcp-1', result: { changes: 1 } });
    const viaHttp = await fetch(new URL('/v1/calls', base), {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t (v) VALUES (?)', params: ['a'] }, callId: 'mcp-1' }),
    });
    expect(await viaHttp.json()).toMatchObject({ ok: true, callId: 'mcp-1', result: { changes: 1 } });
    expect(await rows(c)).toEqual([['a']]);
  });

  it('without one, each call is a new call', async () => {
    const c = await connect();
    await call(c, 'DATA_WRITE_SQL', { sql: 'CREATE TABLE u (v TEXT)' });
    const a = await call(c, 'DATA_WRITE_SQL', { sql: "INSERT INTO u VALUES ('x')" });
    const b = await call(c, 'DATA_WRITE_SQL', { sql: "INSERT INTO u VALUES ('x')" });
    expect(a.structuredContent!.callId).not.toBe(b.structuredContent!.callId);
    expect((await call(c, 'DATA_QUERY_SQL', { sql: 'SELECT count(*) FROM u' })).structuredContent!.rows).toEqual([[2]]);
  });

  it('refuses an id that is not a call id with INVALID_ARGUMENTS, running nothing', async () => {
    const c = await connect();
    for (const bad of [42, 'has space', '12345', '']) {
      const r = await call(c, 'DATA_QUERY_SQL', { sql: 'SELECT 1' }, bad);
      expect(r.isError).toBe(true);
      expect(r.structuredContent).toMatchObject({ error: { code: 'INVALID_ARGUMENTS' } });
    }
  });
});
