import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer } from '../helpers/web-server.ts';

// Behind a TLS proxy the page is https://db.example.com while the app sees plain HTTP on its own
// address. With TRUST_PROXY the sign-in works from the page and its session cookie is Secure;
// without it, the forwarded headers are not believed.

let box: Sandbox;
let direct: WebServer;
let proxied: WebServer;

beforeAll(async () => {
  box = sandbox();
  direct = await startWebServer(box);
  proxied = await startWebServer(box, { trustProxy: true });
});
afterAll(async () => {
  await direct.close();
  await proxied.close();
  await box.cleanup();
});

/** A sign-in as the proxy forwards it: the browser's Origin, the public host and scheme. */
function signInThroughProxy(web: WebServer, key: string) {
  return fetch(`${web.url}/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      origin: 'https://db.example.com',
      'x-forwarded-host': 'db.example.com',
      'x-forwarded-proto': 'https',
      'x-forwarded-for': '203.0.113.9',
    },
    body: new URLSearchParams({ key, next: '/inbox' }).toString(),
  });
}

describe('the web page behind a TLS proxy', () => {
  it('with TRUST_PROXY, signs in from the public origin with a Secure cookie', async () => {
    const { key } = await proxied.members.add('acme', 'pat', 'member');
    const r = await signInThroughProxy(proxied, key);
    expect(r.status).toBe(303);
    const cookie = r.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^agentdb_session=/);
    expect(cookie).toMatch(/;\s*Secure/i);
    expect(cookie).toMatch(/HttpOnly/i);
  });

  it('without it, does not believe forwarded headers: the public origin is refused', async () => {
    const { key } = await direct.members.add('acme', 'quinn', 'member');
    const r = await signInThroughProxy(direct, key);
    expect(r.status).toBe(403);
    expect(r.headers.get('set-cookie')).toBeNull();
  });

  it('reads TRUST_PROXY as false, true, a hop count or addresses, and refuses anything else', () => {
    const base = { AGENTDB_DATA_DIR: '/tmp/agentdb-trust-proxy-test' };
    expect(loadConfig(base).trustProxy).toBe(false);
    expect(loadConfig({ ...base, TRUST_PROXY: 'true' }).trustProxy).toBe(true);
    expect(loadConfig({ ...base, TRUST_PROXY: '2' }).trustProxy).toBe(2);
    expect(loadConfig({ ...base, TRUST_PROXY: '10.0.0.0/8, 127.0.0.1' }).trustProxy).toEqual(['10.0.0.0/8', '127.0.0.1']);
    expect(() => loadConfig({ ...base, TRUST_PROXY: 'yes please' })).toThrow(/TRUST_PROXY/);
  });
});
