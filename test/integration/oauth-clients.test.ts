import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { safeFetch } from '../../src/oauth/client-metadata-document.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { CALLBACK, HOST, oauthFlow } from '../helpers/oauth-flow.ts';
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
  it('a registration nobody signs in through lapses in a day; a consent keeps it 90 days', async () => {
    const keys = keysFor(box.config.prefix);
    const clientId = await register();
    expect(await server.redis.ttl(keys.oauth('client', clientId))).toBeLessThanOrEqual(24 * 3600);
    const { cookie } = await signIn(adminKey);
    await consent(cookie!, authParams(clientId, pkce().challenge));
    expect(await server.redis.ttl(keys.oauth('client', clientId))).toBeGreaterThan(89 * 24 * 3600);
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
