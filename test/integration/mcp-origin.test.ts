import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { mcpOriginPolicy } from '../../src/http/mcp-origin-check.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// /mcp against DNS rebinding and cross-site pages (MCP transports: "Servers MUST validate the
// Origin header"): a Host that is not loopback or configured, and a browser Origin that is not
// the service's own, loopback or configured, are refused with 403 before the key is looked at.

let sb: Sandbox;
let k: KeyedApp;
let key: string;

beforeAll(async () => {
  sb = sandbox();
  const config = loadConfig({ MCP_ALLOWED_HOSTS: 'agentdb.example.com', MCP_ALLOWED_ORIGINS: 'https://app.example.com', HOST: '10.1.2.3' });
  k = keyedApp(sb, { mcpOrigins: mcpOriginPolicy(config) });
  key = await k.agentKey('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

const init = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

async function post(headers: Record<string, string>, bearer = key) {
  const r = await k.app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${bearer}`, ...headers },
    payload: JSON.stringify(init),
  });
  return { status: r.statusCode, json: r.json() as Record<string, unknown> };
}

const refused = (message: RegExp) => ({ status: 403, json: { jsonrpc: '2.0', error: { code: -32000, message }, id: null } });

describe('/mcp Host and Origin checks', () => {
  it('serves loopback hosts on any port, the configured host and HOST, with no Origin (a non-browser client)', async () => {
    for (const host of ['localhost', '127.0.0.1:7070', '[::1]:9', 'LOCALHOST:80', 'agentdb.example.com', 'agentdb.example.com:443', '10.1.2.3:7070']) {
      expect((await post({ host })).status, host).toBe(200);
    }
  });

  it('refuses any other Host with 403 and a JSON-RPC error, key or not', async () => {
    for (const host of ['evil.example', 'evil.example:7070', 'agentdb.example.com.evil.example', '127.0.0.2', 'a@localhost']) {
      expect(await post({ host }), host).toMatchObject(refused(/^Forbidden: Invalid Host/));
      expect(await post({ host }, 'adb_not_a_key'), host).toMatchObject(refused(/^Forbidden: Invalid Host/));
    }
  });

  it("serves a browser Origin that is the service's own, loopback or configured", async () => {
    for (const [host, origin] of [
      ['agentdb.example.com', 'https://agentdb.example.com'],
      ['127.0.0.1:7070', 'http://127.0.0.1:7070'],
      ['127.0.0.1:7070', 'http://localhost:3000'],
      ['agentdb.example.com', 'https://app.example.com'],
    ] as const) {
      expect((await post({ host, origin })).status, `${host} ${origin}`).toBe(200);
    }
  });

  it('refuses Origin: null and any other origin with 403, also on a loopback Host', async () => {
    for (const origin of ['null', 'http://evil.example', 'https://app.example.com.evil.example', 'https://agentdb.example.com.evil.example', 'not a url']) {
      expect(await post({ host: '127.0.0.1:7070', origin }), origin).toMatchObject(refused(/^Forbidden: Invalid Origin header/));
    }
    // The same Host and Origin: a page rebound to this address is still refused by its Host.
    expect(await post({ host: 'evil.example', origin: 'http://evil.example' })).toMatchObject(refused(/^Forbidden: Invalid Host/));
  });

  it('refuses GET and DELETE from a refused Origin with 403 too (not 405)', async () => {
    const r = await k.app.inject({ method: 'GET', url: '/mcp', headers: { origin: 'http://evil.example' } });
    expect(r.statusCode).toBe(403);
  });
});

describe('MCP_ALLOWED_HOSTS and MCP_ALLOWED_ORIGINS', () => {
  it('parse comma lists, * for any host, and refuse what is not a host name or an origin', () => {
    expect(loadConfig({}).mcpAllowedHosts).toEqual([]);
    expect(loadConfig({ MCP_ALLOWED_HOSTS: ' A.example.com, b.example ' }).mcpAllowedHosts).toEqual(['a.example.com', 'b.example']);
    expect(loadConfig({ MCP_ALLOWED_HOSTS: '*' }).mcpAllowedHosts).toBe('*');
    expect(loadConfig({ MCP_ALLOWED_ORIGINS: 'https://a.example.com/, http://b:8080' }).mcpAllowedOrigins).toEqual(['https://a.example.com', 'http://b:8080']);
    expect(() => loadConfig({ MCP_ALLOWED_HOSTS: 'a.example.com:443' })).toThrow(/MCP_ALLOWED_HOSTS/);
    expect(() => loadConfig({ MCP_ALLOWED_HOSTS: 'a/b' })).toThrow(/MCP_ALLOWED_HOSTS/);
    expect(() => loadConfig({ MCP_ALLOWED_ORIGINS: 'https://a.example.com/path' })).toThrow(/MCP_ALLOWED_ORIGINS/);
    expect(() => loadConfig({ MCP_ALLOWED_ORIGINS: 'a.example.com' })).toThrow(/MCP_ALLOWED_ORIGINS/);
  });

  it('make a policy: * for any Host; HOST added unless it is a wildcard', () => {
    const policy = mcpOriginPolicy(loadConfig({ MCP_ALLOWED_HOSTS: '*' }));
    expect(policy.hosts).toBe('*');
    const wild = mcpOriginPolicy(loadConfig({ HOST: '0.0.0.0' }));
    expect(wild.hosts).toEqual([]);
    expect(mcpOriginPolicy(loadConfig({ HOST: '::1' })).hosts).toEqual(['[::1]']);
  });
});
