import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { oauthFlow } from '../helpers/oauth-flow.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';

// Session 27 (G1, 2): /oauth/token and /oauth/revoke took requests without bound (only the
// client id documents they read were counted): one address could keep the service guessing codes,
// refresh tokens and client secrets as fast as it liked. Now both count against one budget per
// address (OAUTH_TOKEN_REQUESTS_PER_MINUTE), answered past it as OAuth answers a limit.

const PER_MINUTE = 3;
let box: Sandbox;
let server: OAuthServer;
let adminKey: string;
const flow = oauthFlow(() => server);

beforeAll(async () => {
  box = sandbox();
  server = await startOAuthServer(box, { tokenRequestsPerMinute: PER_MINUTE });
  adminKey = (await server.members.add('acme', 'ada', 'admin')).key;
}, 30_000);
afterAll(async () => {
  await server?.close();
  await box?.cleanup();
});

function post(url: '/oauth/token' | '/oauth/revoke', remoteAddress: string, body: Record<string, string>) {
  return server.app.inject({ method: 'POST', url, headers: flow.formHeaders, remoteAddress, payload: flow.form(body) });
}

it('past its requests a minute an address gets 429 too_many_requests with Retry-After, on token and revoke alike; others are served', async () => {
  const guess = { grant_type: 'refresh_token', client_id: 'adbc_nobodyregisteredthis', refresh_token: 'adbrt_guess' };
  for (let i = 0; i < PER_MINUTE; i++) expect((await post('/oauth/token', '10.0.0.7', guess)).json()).toMatchObject({ error: 'invalid_client' });
  for (const url of ['/oauth/token', '/oauth/revoke'] as const) {
    const refused = await post(url, '10.0.0.7', { ...guess, token: 'adbat_guess' });
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ error: 'too_many_requests', error_description: expect.stringContaining('a minute from one address') });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.headers['cache-control']).toBe('no-store');
  }
  // Another address (an IPv6 /64 of its own) signs in and refreshes as before.
  const { clientId, tokens } = await flow.signedIn(adminKey);
  const refreshed = await post('/oauth/token', '2001:db8:7::1', { grant_type: 'refresh_token', client_id: clientId, refresh_token: tokens.refresh_token });
  expect(refreshed.statusCode).toBe(200);
});

// Session 37, T18: counted by /64 alone, one IPv6 site (a /48: 65,536 /64s) had no bound at all.
it('the /64s of one IPv6 /48 share 4 times an address’s requests a minute; another /48 is served', async () => {
  const guess = { grant_type: 'refresh_token', client_id: 'adbc_nobodyregisteredthis', refresh_token: 'adbrt_guess' };
  const answers: number[] = [];
  for (let i = 1; i <= 4 * PER_MINUTE + 2; i++) answers.push((await post('/oauth/token', `2001:db8:4:${i.toString(16)}::1`, guess)).statusCode);
  // main: every one answered (401 invalid_client), none 429.
  expect(answers.filter((s) => s === 429)).toHaveLength(2);
  const refused = await post('/oauth/revoke', '2001:db8:4:ff::1', { ...guess, token: 'adbat_guess' });
  expect(refused.statusCode).toBe(429);
  expect(refused.json()).toMatchObject({ error: 'too_many_requests', error_description: expect.stringContaining('one IPv6 /48') });
  expect((await post('/oauth/token', '2001:db8:5:1::1', guess)).statusCode).not.toBe(429);
});
