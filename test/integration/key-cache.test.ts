import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemberRegistry } from '../../src/registry/members.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentKeyRing } from '../../src/registry/agent-keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { KeyAuthenticator } from '../../src/registry/principal.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// The HTTP server keeps who a key is for a while (KEY_CACHE_TTL_MS; 60 s in this app). Every
// registry change is announced, so a key used a moment ago and then revoked, narrowed or
// orphaned must be refused by its very next request, well inside that time.

let sb: Sandbox;
let k: KeyedApp;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  k = keyedApp(sb);
  await k.principals.start();
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

const call = (bearer: string, tool = 'DATA_DESCRIBE_SCHEMA') =>
  k.app.inject({ method: 'POST', url: '/v1/calls', headers: { authorization: `Bearer ${bearer}` }, payload: { tool, arguments: {} } });
const listTools = async (bearer: string) => {
  const r = await k.app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { authorization: `Bearer ${bearer}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
  });
  return { status: r.statusCode, tools: (r.json() as { result?: { tools: { name: string }[] } }).result?.tools.map((t) => t.name) };
};

/** Runs `change` and waits until this server has heard of it (an event, never a sleep). */
async function heard(change: () => Promise<unknown>): Promise<void> {
  const dropped = k.principals.changed();
  await change();
  await dropped;
}

describe('cached keys', () => {
  it('a revoked agent key is refused by its next request, on /v1/calls and /mcp', async () => {
    const key = await k.agentKey('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
    expect((await call(key)).statusCode).toBe(200);
    expect((await listTools(key)).status).toBe(200);
    const ring = new AgentKeyRing(k.redis, keysFor(sb.config.prefix), new AgentRegistry(k.redis, keysFor(sb.config.prefix)));
    const [{ id }] = await ring.list('acme', 'scout');
    await heard(() => ring.revoke('acme', id!));
    expect((await call(key)).statusCode).toBe(401);
    expect((await listTools(key)).status).toBe(401);
  });

  it('a revoked member key is refused by its next request', async () => {
    const key = await k.memberKey('acme', 'ada', 'admin');
    expect((await call(key)).statusCode).toBe(200);
    await heard(() => new MemberRegistry(k.redis, keysFor(sb.config.prefix)).revoke('acme', 'ada'));
    expect((await call(key)).statusCode).toBe(401);
  });

  it("an agent's narrowed settings apply to its next request", async () => {
    const key = await k.agentKey('acme', 'nosy', { displayName: 'Nosy', settings: { database: 'agent' } });
    expect(await listTools(key)).toMatchObject({ status: 200, tools: expect.arrayContaining(['DATA_QUERY_SQL']) });
    await heard(() => new AgentRegistry(k.redis, keysFor(sb.config.prefix)).put('acme', 'nosy', { displayName: 'Nosy', settings: { database: 'off' } }));
    expect(await listTools(key)).toEqual({ status: 200, tools: [] });
  });

  it("a removed workspace's keys are refused by their next request", async () => {
    const key = await k.agentKey('gone', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
    expect((await call(key)).statusCode).toBe(200);
    await heard(() => k.workspaces.remove('gone'));
    expect((await call(key)).statusCode).toBe(401);
  });

  it('gives every request with a cached key the same principal, which none of them can change', async () => {
    const key = await k.agentKey('acme', 'fixed', { displayName: 'Fixed', settings: { database: 'agent' } });
    const auth = new KeyAuthenticator(k.redis, keysFor(sb.config.prefix), k.principals);
    const first = await auth.authenticate(key);
    const cached = await auth.authenticate(key);
    expect(cached).toEqual(first);
    if (cached?.kind !== 'agent') throw new Error('an agent key');
    expect(() => {
      (cached.settings as { database: string }).database = 'off';
    }).toThrow(TypeError);
    expect(await auth.authenticate(key)).toMatchObject({ settings: { database: 'agent' } });
    expect((await call(key)).statusCode).toBe(200);
  });
});
