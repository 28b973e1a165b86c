import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_UNUSED_TTL_S } from '../../src/oauth/oauth-clients.ts';
import { MAX_GRANTS_PER_MEMBER } from '../../src/oauth/oauth-grants.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { CALLBACK, HOST, oauthFlow } from '../helpers/oauth-flow.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';

// How long a registered client a person consented to is kept: as long as a grant may still
// refresh through it, then a day, as one nobody signed in through (hostile review T3: every
// client a member consented to was kept 90 days, whatever became of its grant).

const REFRESH_TTL_S = 30 * 24 * 3600;
let box: Sandbox;
let server: OAuthServer;
let adaKey: string;
let bobKey: string;

beforeAll(async () => {
  box = sandbox();
  server = await startOAuthServer(box, { refreshTtlS: REFRESH_TTL_S, tokenRequestsPerMinute: 1000 });
  adaKey = (await server.members.add('acme', 'ada', 'admin')).key;
  bobKey = (await server.members.add('acme', 'bob', 'member')).key;
}, 30_000);

afterAll(async () => {
  await server?.close();
  await box?.cleanup();
});

const { form, formHeaders, signIn, pkce, consent, authParams, token } = oauthFlow(() => server);
let addresses = 0;

/** A public client registered from an address of its own (registrations are counted by address). */
async function register(): Promise<string> {
  addresses++;
  const res = await server.app.inject({
    method: 'POST',
    url: '/oauth/register',
    headers: { host: HOST },
    remoteAddress: `2001:db8:${addresses.toString(16)}::1`,
    payload: { client_name: 'Lifetime', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' },
  });
  expect(res.statusCode).toBe(201);
  return res.json<{ client_id: string }>().client_id;
}

/** `key`'s member consents to `clientId` and exchanges the code: its refresh token. */
async function grantTo(key: string, clientId: string): Promise<string> {
  const { cookie } = await signIn(key);
  const { verifier, challenge } = pkce();
  const code = (await consent(cookie!, authParams(clientId, challenge))).searchParams.get('code')!;
  const res = await token({ grant_type: 'authorization_code', client_id: clientId, code, code_verifier: verifier, redirect_uri: CALLBACK });
  expect(res.statusCode).toBe(200);
  return res.json<{ refresh_token: string }>().refresh_token;
}

async function revoke(clientId: string, refreshToken: string): Promise<void> {
  const res = await server.app.inject({
    method: 'POST',
    url: '/oauth/revoke',
    headers: formHeaders,
    payload: form({ client_id: clientId, token: refreshToken }),
  });
  expect(res.statusCode).toBe(200);
}

const clientTtl = (clientId: string) => server.redis.ttl(keysFor(box.config.prefix).oauth('client', clientId));

describe('a consented client lives as long as its grants', () => {
  it('kept as long as its refresh token; its grant revoked, back to a day', async () => {
    const clientId = await register();
    const refresh = await grantTo(adaKey, clientId);
    expect(await clientTtl(clientId)).toBeGreaterThan(REFRESH_TTL_S - 60);
    await revoke(clientId, refresh);
    const ttl = await clientTtl(clientId);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(CLIENT_UNUSED_TTL_S);
  });

  it('a client another member still signs in through keeps its lifetime until that grant goes too', async () => {
    const clientId = await register();
    const ada = await grantTo(adaKey, clientId);
    const bob = await grantTo(bobKey, clientId);
    await revoke(clientId, ada);
    expect(await clientTtl(clientId)).toBeGreaterThan(REFRESH_TTL_S - 60);
    // Bob's grant still refreshes through it.
    const refreshed = await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: bob });
    expect(refreshed.statusCode).toBe(200);
    await revoke(clientId, refreshed.json<{ refresh_token: string }>().refresh_token);
    expect(await clientTtl(clientId)).toBeLessThanOrEqual(CLIENT_UNUSED_TTL_S);
  });

  it(`a member consenting ${MAX_GRANTS_PER_MEMBER + 10} registrations keeps at most ${MAX_GRANTS_PER_MEMBER} clients past a day`, async () => {
    const { key } = await server.members.add('acme', 'carol', 'member');
    const clients: string[] = [];
    for (let i = 0; i < MAX_GRANTS_PER_MEMBER + 10; i++) {
      const clientId = await register();
      await grantTo(key, clientId);
      clients.push(clientId);
    }
    const ttls = await Promise.all(clients.map(clientTtl));
    // The oldest ten, their grants ended past the member's fifty, went back to a day.
    expect(ttls.filter((t) => t > CLIENT_UNUSED_TTL_S)).toHaveLength(MAX_GRANTS_PER_MEMBER);
    expect(ttls.slice(0, 10).every((t) => t > 0 && t <= CLIENT_UNUSED_TTL_S)).toBe(true);
  }, 60_000);
});
