import { afterAll, beforeAll, expect, it } from 'vitest';
import { DOCUMENT_READS_PER_48_PER_HOUR } from '../../src/oauth/oauth-clients.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { CALLBACK, HOST } from '../helpers/oauth-flow.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';

// Hostile review T1 (session 26): client id metadata documents read for the token endpoint, open
// to anyone, were counted by IPv6 /64 only. One /48 holds 65,536 of them: 30 reads an hour each,
// every read a fetch of a URL the sender chose and up to 4 KB kept in Redis for an hour.

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

/** A token request naming document `n` as its client, from `remoteAddress`. */
const tokenFor = (n: number, remoteAddress: string) => {
  const url = `https://docs${n}.example/client.json`;
  server.documents.set(url, { client_id: url, redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' });
  return server.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { host: HOST, 'content-type': 'application/x-www-form-urlencoded' },
    remoteAddress,
    payload: new URLSearchParams({ grant_type: 'refresh_token', client_id: url }).toString(),
  });
};

it('IPv6 document reads are counted by /48 too: one /48 cannot have agentdb read documents /64 by /64', async () => {
  let read = 0;
  // Each /64 within its own 30; together they reach the /48's bound.
  for (let net = 1; read < DOCUMENT_READS_PER_48_PER_HOUR; net++)
    for (let i = 1; i <= 20 && read < DOCUMENT_READS_PER_48_PER_HOUR; i++, read++)
      expect((await tokenFor(read, `2001:db8:77:${net.toString(16)}::${i}`)).json()).toMatchObject({ error: 'invalid_request' });
  const refused = await tokenFor(read + 1, '2001:db8:77:ffff::1');
  expect(refused.statusCode).toBe(429);
  expect(refused.json()).toMatchObject({ error: 'too_many_requests', error_description: expect.stringMatching(/\/48: try again in \d+ s/) });
  // Another /48 reads on; a document read already is in the cache, for anyone, free.
  expect((await tokenFor(read + 2, '2001:db8:78:1::1')).json()).toMatchObject({ error: 'invalid_request' });
  expect((await tokenFor(0, '2001:db8:77:ffff::1')).json()).toMatchObject({ error: 'invalid_request' });
});
