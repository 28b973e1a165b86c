import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { HOST } from '../helpers/oauth-flow.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';

// Hostile review T1 (session 26): the token and revocation endpoints, open to anyone, took a
// JSON body's fields and a Basic header's percent-encoding as they came. A number or an array
// for client_id, or `%zz` in Basic, threw inside the handler: 500 INTERNAL, and a ~1 KB stack
// trace written to the log for each 60-byte request of someone who holds nothing.

let box: Sandbox;
let server: OAuthServer;

beforeAll(async () => {
  box = sandbox();
  server = await startOAuthServer(box);
}, 30_000);
afterAll(async () => {
  await server?.close();
  await box?.cleanup();
});

const post = (url: string, payload: string, headers: Record<string, string>) =>
  server.app.inject({ method: 'POST', url, payload, headers: { host: HOST, ...headers } });
const json = { 'content-type': 'application/json' };

it.each([
  ['/oauth/token', '{"client_id":1,"grant_type":"refresh_token"}'],
  ['/oauth/token', '{"client_id":["https://a.example/c"],"grant_type":"authorization_code","code":"x"}'],
  ['/oauth/token', '{"client_id":"adbc_aaaaaaaaaaaaaaaaaaaaaa","grant_type":"authorization_code","code":{"a":1},"code_verifier":["v"]}'],
  ['/oauth/revoke', '{"client_id":{"a":1},"token":"x"}'],
  ['/oauth/revoke', '{"client_id":"adbc_aaaaaaaaaaaaaaaaaaaaaa","token":7}'],
])('%s with a JSON field that is not text is invalid_request (400): %s', async (url, body) => {
  const res = await post(url, body, json);
  expect(res.statusCode).toBe(400);
  expect(res.json()).toMatchObject({ error: 'invalid_request' });
});

it.each(['/oauth/token', '/oauth/revoke'])('%s with a Basic header that does not decode is invalid_client (401)', async (url) => {
  const res = await post(url, 'grant_type=refresh_token&token=x', {
    'content-type': 'application/x-www-form-urlencoded',
    authorization: `Basic ${Buffer.from('%zz:secret').toString('base64')}`,
  });
  expect(res.statusCode).toBe(401);
  expect(res.json()).toMatchObject({ error: 'invalid_client' });
});
