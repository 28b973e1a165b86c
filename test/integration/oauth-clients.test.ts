import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { safeFetch } from '../../src/oauth/client-metadata-document.ts';
import { REGISTRATIONS_PER_48_PER_HOUR, REGISTRATIONS_PER_HOUR } from '../../src/oauth/oauth-clients.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { CALLBACK, HOST, linkBack, oauthFlow } from '../helpers/oauth-flow.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';

// Who may be an OAuth client: registered ones (public or with a secret), ones described by a
// client id metadata document, and how much registering anyone may do.

let box: Sandbox;
let server: OAuthServer;
let adminKey: string;

beforeAll(async () => {
  box = sandbox();
  server = await startOAuthServer(box);
  adminKey = (await server.members.add('acme', 'ada', 'admin')).key;
}, 30_000);

afterAll(async () => {
  await server?.close();
  await box?.cleanup();
});

const { form, formHeaders, signIn, pkce, authorizePage, consent, authParams, token, mcp, register } = oauthFlow(() => server);

describe('OAuth clients', () => {
  it('a registration nobody signs in through lapses in a day; a consent takes it out of the unconsented ones, not longer kept', async () => {
    const keys = keysFor(box.config.prefix);
    const clientId = await register();
    expect(await server.redis.ttl(keys.oauth('client', clientId))).toBeLessThanOrEqual(24 * 3600);
    const { cookie } = await signIn(adminKey);
    await consent(cookie!, authParams(clientId, pkce().challenge));
    expect(await server.redis.zscore(keys.oauth('clients', 'unconsented'), clientId)).toBeNull();
    // Its grant's tokens keep it longer (test/integration/oauth-client-lifetime.test.ts); a code alone does not.
    expect(await server.redis.ttl(keys.oauth('client', clientId))).toBeLessThanOrEqual(24 * 3600);
  });

  it('a confidential client authenticates with its secret (HTTP Basic), else invalid_client', async () => {
    const reg = await server.app.inject({
      method: 'POST',
      url: '/oauth/register',
      headers: { host: HOST },
      payload: { client_name: 'Server App', redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'client_secret_basic' },
    });
    const { client_id, client_secret } = reg.json<{ client_id: string; client_secret: string }>();
    expect(client_secret).toMatch(/^adbs_/);
    const { cookie } = await signIn(adminKey);
    const { verifier, challenge } = pkce();
    const code = (await consent(cookie!, { ...authParams(client_id, challenge), redirect_uri: 'https://app.example/cb' })).searchParams.get('code')!;
    const body = { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: 'https://app.example/cb' };
    const without = await token({ ...body, client_id });
    expect(without.statusCode).toBe(401);
    expect(without.json()).toMatchObject({ error: 'invalid_client' });
    const basic = Buffer.from(`${client_id}:${client_secret}`).toString('base64');
    const res = await server.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { ...formHeaders, authorization: `Basic ${basic}` },
      payload: form(body),
    });
    // The refused request spent nothing: the client is checked before the code.
    expect(res.statusCode).toBe(200);
    expect((await mcp(res.json<{ access_token: string }>().access_token)).statusCode).toBe(200);
  });
});

describe('redirect URIs', () => {
  it('a loopback redirect URI matches on any port (RFC 8252), any other only exactly', async () => {
    const clientId = await register(['http://127.0.0.1/callback']);
    const { cookie } = await signIn(adminKey);
    const { challenge } = pkce();
    const back = await consent(cookie!, { ...authParams(clientId, challenge), redirect_uri: 'http://127.0.0.1:51234/callback' });
    expect(back.origin + back.pathname).toBe('http://127.0.0.1:51234/callback');
    for (const other of ['http://127.0.0.1:51234/elsewhere', 'http://localhost:51234/callback']) {
      const res = await authorizePage(cookie, { ...authParams(clientId, challenge), redirect_uri: other });
      expect(res.statusCode).toBe(400);
    }
    const https = await register(['https://app.example/cb']);
    const res = await authorizePage(cookie, { ...authParams(https, challenge), redirect_uri: 'https://app.example:8443/cb' });
    expect(res.statusCode).toBe(400);
  });
});

describe('redirect URIs, refused', () => {
  it('a loopback redirect URI with a fragment or credentials matches nothing registered; registration refuses credentials', async () => {
    const clientId = await register(['http://127.0.0.1/callback']);
    const { cookie } = await signIn(adminKey);
    const { challenge } = pkce();
    for (const uri of [
      'http://127.0.0.1:9999/callback#x',
      'http://127.0.0.1:9999/callback#',
      'http://u@127.0.0.1:1/callback',
      'http://u:p@127.0.0.1/callback',
    ]) {
      const res = await authorizePage(cookie, { ...authParams(clientId, challenge), redirect_uri: uri });
      expect(res.statusCode, uri).toBe(400);
      expect(res.headers.location).toBeUndefined();
    }
    const creds = await server.app.inject({
      method: 'POST',
      url: '/oauth/register',
      headers: { host: HOST },
      payload: { redirect_uris: ['https://u:p@app.example/cb'], token_endpoint_auth_method: 'none' },
    });
    expect(creds.statusCode).toBe(400);
  });
});

describe('the consent page', () => {
  it('marks the app’s name as its own, unverified, and shows where the answer goes', async () => {
    const clientId = await register();
    const { cookie } = await signIn(adminKey);
    const page = await authorizePage(cookie, authParams(clientId, pkce().challenge));
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<title>Connect Refusal Desk (unverified name)');
    expect(page.body).toContain('is the name the app gives itself; agentdb has not verified it. Its answer goes to <strong>127.0.0.1:7777</strong>');
  });
});

describe('client id metadata documents', () => {
  const DOC = 'https://desk.example/oauth/client.json';

  it('a client whose id is its metadata document URL signs in without registering', async () => {
    server.documents.set(DOC, { client_id: DOC, client_name: 'Doc Desk', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' });
    const { cookie } = await signIn(adminKey);
    const { verifier, challenge } = pkce();
    const page = await authorizePage(cookie, authParams(DOC, challenge));
    expect(page.body).toContain('This app is described by desk.example');
    const code = (await consent(cookie!, authParams(DOC, challenge))).searchParams.get('code')!;
    const res = await token({ grant_type: 'authorization_code', client_id: DOC, redirect_uri: CALLBACK, code, code_verifier: verifier });
    expect(res.statusCode).toBe(200);
    expect((await mcp(res.json<{ access_token: string }>().access_token)).statusCode).toBe(200);
  });

  it('an error goes back at once only to a redirect URI on the document’s own host; any other is shown with a link', async () => {
    const own = 'https://own.example/client.json';
    server.documents.set(own, { client_id: own, client_name: 'Own', redirect_uris: ['https://own.example/cb', CALLBACK], token_endpoint_auth_method: 'none' });
    const { cookie } = await signIn(adminKey);
    const plain = { code_challenge_method: 'plain' };
    const vouched = await authorizePage(cookie, authParams(own, pkce().challenge, { ...plain, redirect_uri: 'https://own.example/cb' }));
    expect(vouched.statusCode).toBe(303);
    const to = new URL(vouched.headers.location as string);
    expect(to.origin + to.pathname).toBe('https://own.example/cb');
    expect(to.searchParams.get('error')).toBe('invalid_request');
    const elsewhere = await authorizePage(cookie, authParams(own, pkce().challenge, plain));
    expect(elsewhere.statusCode).toBe(400);
    expect(elsewhere.headers.location).toBeUndefined();
    expect(linkBack(elsewhere.body).searchParams.get('error')).toBe('invalid_request');
  });

  it('a document that does not name its own URL, or cannot be read, is no client', async () => {
    const copied = 'https://copy.example/client.json';
    server.documents.set(copied, { client_id: DOC, client_name: 'Doc Desk', redirect_uris: [CALLBACK] });
    const { cookie } = await signIn(adminKey);
    for (const id of [copied, 'https://gone.example/client.json']) {
      const res = await authorizePage(cookie, authParams(id, pkce().challenge));
      expect(res.statusCode).toBe(400);
      expect(res.body).toContain('invalid_client');
    }
  });

  it('agentdb reads documents from public addresses only', async () => {
    for (const url of ['https://127.0.0.1/client.json', 'https://[::1]/client.json', 'https://169.254.169.254/latest', 'https://localhost/client.json'])
      await expect(safeFetch(url)).rejects.toThrow('not a public address');
  });
});

describe('OAuth registration bounds', () => {
  it('a registration keeps at most 4 KB: ten 1,500-character redirect URIs are refused', async () => {
    const uris = Array.from({ length: 10 }, (_, i) => `https://app.example/${'x'.repeat(1500)}/${i}`);
    const res = await server.app.inject({
      method: 'POST',
      url: '/oauth/register',
      headers: { host: HOST },
      remoteAddress: '192.0.2.40',
      payload: { redirect_uris: uris, token_endpoint_auth_method: 'none' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_client_metadata' });
  });

  it('IPv6 registrations are counted by /64: the 31st from one /64 is refused, another /64 is not', async () => {
    const from = (remoteAddress: string) =>
      server.app.inject({
        method: 'POST',
        url: '/oauth/register',
        headers: { host: HOST },
        remoteAddress,
        payload: { redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' },
      });
    for (let i = 1; i <= REGISTRATIONS_PER_HOUR; i++) expect((await from(`2001:db8:5:5::${i.toString(16)}`)).statusCode).toBe(201);
    expect((await from('2001:db8:5:5:ffff:ffff:ffff:ffff')).statusCode).toBe(429);
    expect((await from('2001:db8:5:6::1')).statusCode).toBe(201);
  });

  it('IPv6 registrations are counted by /48 too: one /48 cannot fill the service-wide cap /64 by /64', async () => {
    const from = (remoteAddress: string) =>
      server.app.inject({
        method: 'POST',
        url: '/oauth/register',
        headers: { host: HOST },
        remoteAddress,
        payload: { redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' },
      });
    // Each /64 of 2001:db8:48::/48 within its own 30; together they reach the /48's bound.
    let made = 0;
    for (let net = 1; made < REGISTRATIONS_PER_48_PER_HOUR; net++)
      for (let i = 1; i <= 20 && made < REGISTRATIONS_PER_48_PER_HOUR; i++, made++)
        expect((await from(`2001:db8:48:${net.toString(16)}::${i.toString(16)}`)).statusCode).toBe(201);
    const refused = await from('2001:db8:48:ffff::1');
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ error: 'too_many_requests', error_description: expect.stringMatching(/\/48: try again in \d+ s/) });
    expect((await from('2001:db8:49:1::1')).statusCode).toBe(201);
  });

  // Last in the file: it spends this sandbox's registrations for the hour.
  it('one address registers at most 30 clients an hour: then 429 too_many_requests', async () => {
    const answers: number[] = [];
    for (let i = 0; i < 31; i++) {
      const res = await server.app.inject({
        method: 'POST',
        url: '/oauth/register',
        headers: { host: HOST },
        payload: { redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' },
      });
      answers.push(res.statusCode);
      if (res.statusCode === 429) expect(res.json()).toMatchObject({ error: 'too_many_requests' });
    }
    expect(answers.at(-1)).toBe(429);
    expect(answers.filter((s) => s === 201).length).toBeLessThanOrEqual(30);
  });
});
