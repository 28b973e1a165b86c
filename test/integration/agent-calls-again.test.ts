import { afterAll, beforeAll, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Seen live in session 27 (M1): an agent removed and registered again under its name, with
// settings that give it no shared tables, read with its new key the earlier registration's read
// of the shared tables by its call id.

let sb: Sandbox;
let k: KeyedApp;
let base: string;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  k = keyedApp(sb);
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  // A pool's start on a machine the other suites load took past the default minute.
}, 120_000);
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

async function send(key: string, method: 'GET' | 'POST', url: string, body?: object): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}${url}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

it("an agent registered again under its name does not read the earlier registration's calls by id", async () => {
  const admin = await k.memberKey('acme', 'root', 'admin');
  expect((await send(admin, 'POST', '/v1/calls', { tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE s (v TEXT)' } })).body).toMatchObject({ ok: true });
  await send(admin, 'POST', '/v1/calls', { tool: 'DATA_WRITE_SQL', arguments: { sql: "INSERT INTO s VALUES ('shared-secret')" } });
  const first = await k.agentKey('acme', 'scout', { displayName: 'Scout', settings: { database: 'workspace', sharedData: true } });
  const read = await send(first, 'POST', '/v1/calls', { tool: 'DATA_QUERY_SQL', callId: 'p1', arguments: { sql: 'SELECT v FROM s', scope: 'workspace' } });
  expect(read.body).toMatchObject({ ok: true, result: { rows: [['shared-secret']] } });
  // The earlier registration's own key still reads it while it is registered.
  expect((await send(first, 'GET', '/v1/calls/p1')).body).toEqual(read.body);

  expect(await new AgentRegistry(k.redis, keysFor(sb.config.prefix)).remove('acme', 'scout')).toBe(true);
  const again = await k.agentKey('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
  const looked = await send(again, 'GET', '/v1/calls/p1');
  expect(looked.status).toBe(404);
  expect(looked.body).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
  expect(JSON.stringify(looked.body)).not.toContain('shared-secret');
  // Its own calls it reads.
  const own = await send(again, 'POST', '/v1/calls', { tool: 'DATA_QUERY_SQL', callId: 'p2', arguments: { sql: 'SELECT 1 AS one' } });
  expect(own.body).toMatchObject({ ok: true });
  expect((await send(again, 'GET', '/v1/calls/p2')).body).toEqual(own.body);
});
