import { OAuthMetadataSchema, OAuthProtectedResourceMetadataSchema } from '@modelcontextprotocol/sdk/shared/auth.js';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revoke as revokeMember } from '../../src/cli/members.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentKeyRing } from '../../src/registry/agent-keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { BASE, CALLBACK, HOST, linkBack, oauthFlow } from '../helpers/oauth-flow.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';

// Every way an OAuth sign-in must fail, each with its RFC 6749 error, through the app as
// `agentdb start` builds it (requests injected; no tool runs, so no workers).

let box: Sandbox;
let server: OAuthServer;
let adminKey: string;
let agentKey: string;

beforeAll(async () => {
  box = sandbox();
  server = await startOAuthServer(box);
  adminKey = (await server.members.add('acme', 'ada', 'admin')).key;
  const keys = keysFor(box.config.prefix);
  const agents = new AgentRegistry(server.redis, keys);
  await agents.put('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
  agentKey = (await new AgentKeyRing(server.redis, keys, agents).mint('acme', 'scout')).key;
}, 30_000);

afterAll(async () => {
  await server?.close();
  await box?.cleanup();
});

const { form, formHeaders, register, signIn, pkce, authorizePage, consent, authParams, token, mcp } = oauthFlow(() => server);
const signedIn = (extra: Record<string, string> = {}) => oauthFlow(() => server).signedIn(adminKey, extra);

describe('OAuth discovery', () => {
  it('a 401 from /mcp names its protected resource metadata, which names agentdb as its authorization server', async () => {
    const denied = await mcp(undefined);
    expect(denied.statusCode).toBe(401);
    expect(denied.headers['www-authenticate']).toContain(`resource_metadata="${BASE}/.well-known/oauth-protected-resource/mcp"`);
    const prm = OAuthProtectedResourceMetadataSchema.parse(
      (await server.app.inject({ url: '/.well-known/oauth-protected-resource/mcp', headers: { host: HOST } })).json(),
    );
    expect(prm).toMatchObject({ resource: `${BASE}/mcp`, authorization_servers: [BASE] });
    const as = OAuthMetadataSchema.parse((await server.app.inject({ url: '/.well-known/oauth-authorization-server', headers: { host: HOST } })).json());
    expect(as).toMatchObject({ issuer: BASE, code_challenge_methods_supported: ['S256'], registration_endpoint: `${BASE}/oauth/register` });
  });

  // Session 27 (G1, 4): the body told a client whose token had expired to send a key.
  it('a 401 from /mcp says what was wrong with what was sent: nothing, a token no longer good, a key not active', async () => {
    const message = (r: { json(): unknown }) => (r.json() as { error: { message: string } }).error.message;
    const nothing = await mcp(undefined);
    expect(message(nothing)).toBe('Unauthorized: send Authorization: Bearer <an active agent or member key, or an access token from signing in>.');
    const { tokens } = await signedIn();
    server.advance(tokens.expires_in * 1000 + 1000);
    const expired = await mcp(tokens.access_token);
    expect(expired.statusCode).toBe(401);
    expect(message(expired)).toBe('Unauthorized: the access token is expired, revoked or for another endpoint: refresh it, or sign in again.');
    const badKey = await mcp(`${adminKey.slice(0, -4)}xxxx`);
    expect(message(badKey)).toBe('Unauthorized: the key sent is not an active agent or member key.');
    for (const r of [nothing, expired, badKey]) {
      expect(r.statusCode).toBe(401);
      expect(r.headers['www-authenticate']).toContain(`resource_metadata="${BASE}/.well-known/oauth-protected-resource/mcp"`);
    }
    expect(expired.headers['www-authenticate']).toContain('error="invalid_token"');
    expect(badKey.headers['www-authenticate']).toContain('error="invalid_token"');
  });

  it('member and agent keys keep working at /mcp beside tokens', async () => {
    expect((await mcp(adminKey)).statusCode).toBe(200);
    expect((await mcp(agentKey)).statusCode).toBe(200);
    const { tokens } = await signedIn();
    expect((await mcp(tokens.access_token)).statusCode).toBe(200);
  });
});

describe('OAuth refusals', () => {
  it('a wrong PKCE verifier is invalid_grant, and spends the code', async () => {
    const clientId = await register();
    const { cookie } = await signIn(adminKey);
    const { verifier, challenge } = pkce();
    const code = (await consent(cookie!, authParams(clientId, challenge))).searchParams.get('code')!;
    const wrong = await token({ grant_type: 'authorization_code', client_id: clientId, redirect_uri: CALLBACK, code, code_verifier: pkce().verifier });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json()).toMatchObject({ error: 'invalid_grant' });
    const right = await token({ grant_type: 'authorization_code', client_id: clientId, redirect_uri: CALLBACK, code, code_verifier: verifier });
    expect(right.json()).toMatchObject({ error: 'invalid_grant' });
  });

  it('a code used once is invalid_grant the second time, and ends the tokens it gave', async () => {
    const clientId = await register();
    const { cookie } = await signIn(adminKey);
    const { verifier, challenge } = pkce();
    const code = (await consent(cookie!, authParams(clientId, challenge))).searchParams.get('code')!;
    const first = await token({ grant_type: 'authorization_code', client_id: clientId, redirect_uri: CALLBACK, code, code_verifier: verifier });
    expect(first.statusCode).toBe(200);
    const again = await token({ grant_type: 'authorization_code', client_id: clientId, redirect_uri: CALLBACK, code, code_verifier: verifier });
    expect(again.statusCode).toBe(400);
    expect(again.json()).toMatchObject({ error: 'invalid_grant' });
    // A code seen twice was copied: the grant it made is revoked (OAuth 2.1 §4.1.3).
    expect((await mcp(first.json<{ access_token: string }>().access_token)).statusCode).toBe(401);
  });

  it('an expired access token is refused with invalid_token; its refresh token rotates, and a reused one ends the grant', async () => {
    const { clientId, tokens } = await signedIn();
    expect((await mcp(tokens.access_token)).statusCode).toBe(200);
    server.advance(tokens.expires_in * 1000 + 1000);
    const expired = await mcp(tokens.access_token);
    expect(expired.statusCode).toBe(401);
    expect(expired.headers['www-authenticate']).toContain('error="invalid_token"');
    const refreshed = await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: tokens.refresh_token });
    expect(refreshed.statusCode).toBe(200);
    const next = refreshed.json<{ access_token: string; refresh_token: string }>();
    expect(next.refresh_token).not.toBe(tokens.refresh_token);
    expect((await mcp(next.access_token)).statusCode).toBe(200);
    const reused = await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: tokens.refresh_token });
    expect(reused.json()).toMatchObject({ error: 'invalid_grant' });
    expect((await mcp(next.access_token)).statusCode).toBe(401);
    const newest = await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: next.refresh_token });
    expect(newest.json()).toMatchObject({ error: 'invalid_grant' });
  });

  it('a refresh replaces the access token: a grant holds one at a time', async () => {
    const { clientId, tokens } = await signedIn();
    const refreshed = await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: tokens.refresh_token });
    expect((await mcp(tokens.access_token)).statusCode).toBe(401);
    expect((await mcp(refreshed.json<{ access_token: string }>().access_token)).statusCode).toBe(200);
  });

  it('a grant disconnected under Connected apps stops its tokens at once', async () => {
    const { clientId, cookie, tokens } = await signedIn();
    const apps = await server.app.inject({ url: '/apps', headers: { host: HOST, cookie } });
    const grantId = [...apps.body.matchAll(/data-grant="([^"]+)"/g)].map((m) => m[1]!).at(0)!;
    const csrf = /name="csrf-token" content="([^"]+)"/.exec(apps.body)![1]!;
    // Newest first: the grant just made.
    const revoke = await server.app.inject({
      method: 'POST',
      url: `/apps/${grantId}/revoke`,
      headers: { ...formHeaders, origin: BASE, cookie },
      payload: form({ _csrf: csrf }),
    });
    expect(revoke.statusCode).toBe(303);
    expect((await mcp(tokens.access_token)).statusCode).toBe(401);
    const refresh = await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: tokens.refresh_token });
    expect(refresh.json()).toMatchObject({ error: 'invalid_grant' });
  });

  it('Connected apps: a grant whose code was never exchanged shows "never" as its last token, an exchanged one when', async () => {
    const key = (await server.members.add('acme', 'gus', 'member')).key;
    const clientId = await register();
    const { cookie } = await signIn(key);
    const { challenge } = pkce();
    // Allowed, so a grant exists, but its code is never sent to the token endpoint.
    expect((await consent(cookie!, authParams(clientId, challenge))).searchParams.get('code')).toBeTruthy();
    const before = await server.app.inject({ url: '/apps', headers: { host: HOST, cookie } });
    expect([...before.body.matchAll(/<td class="last-token"[^>]*>([^<]*)</g)].map((m) => m[1])).toEqual(['never']);
    // The same member's grant carried through to its tokens says when its token was issued.
    await oauthFlow(() => server).signedIn(key);
    const after = await server.app.inject({ url: '/apps', headers: { host: HOST, cookie } });
    const shown = [...after.body.matchAll(/<td class="last-token"[^>]*>([^<]*)</g)].map((m) => m[1]);
    expect(shown).toHaveLength(2);
    expect(shown.filter((t) => t === 'never')).toHaveLength(1);
    expect(shown.find((t) => t !== 'never')).toMatch(/^(just now|\d+ s ago)$/);
  });

  it('a token is for its resource only, and a resource not of this server is invalid_target', async () => {
    const { tokens } = await signedIn();
    expect((await mcp(tokens.access_token, '/mcp')).statusCode).toBe(200);
    expect((await mcp(tokens.access_token, '/mcp/w/acme')).statusCode).toBe(401);
    const pinned = await signedIn({ resource: `${BASE}/mcp/w/acme` });
    expect((await mcp(pinned.tokens.access_token, '/mcp/w/acme')).statusCode).toBe(200);
    expect((await mcp(pinned.tokens.access_token, '/mcp')).statusCode).toBe(401);

    const clientId = await register();
    const { cookie } = await signIn(adminKey);
    const elsewhere = await authorizePage(cookie, authParams(clientId, pkce().challenge, { resource: 'https://evil.example/mcp' }));
    // A registered client's redirect URI is its own word: the error is shown, with a link back.
    expect(elsewhere.statusCode).toBe(400);
    expect(elsewhere.headers.location).toBeUndefined();
    const to = linkBack(elsewhere.body);
    expect(to.origin + to.pathname).toBe(CALLBACK);
    expect(to.searchParams.get('error')).toBe('invalid_target');
    expect(to.searchParams.get('state')).toBe('s1');
  });

  // Session 27 (G1, 3): a team endpoint lists no tools, yet a grant could name it: a token good for nothing.
  it('a team endpoint is no grant’s target: invalid_target at authorization, and a refresh of a grant made for one before', async () => {
    const clientId = await register();
    const { cookie } = await signIn(adminKey);
    const team = await authorizePage(cookie, authParams(clientId, pkce().challenge, { resource: `${BASE}/mcp/t/sales` }));
    expect(team.statusCode).toBe(400);
    expect(linkBack(team.body).searchParams.get('error')).toBe('invalid_target');

    const made = await signedIn();
    const keys = keysFor(box.config.prefix);
    const grantId = (await server.redis.zrevrange(keys.oauth('grants', 'acme/ada'), 0, 0))[0]!;
    const grant = JSON.parse((await server.redis.get(keys.oauth('grant', grantId)))!) as { resource: string };
    // As a grant consented to before this fix would be.
    await server.redis.set(keys.oauth('grant', grantId), JSON.stringify({ ...grant, resource: `${BASE}/mcp/t/sales` }), 'KEEPTTL');
    const refresh = await token({ grant_type: 'refresh_token', client_id: made.clientId, refresh_token: made.tokens.refresh_token });
    expect(refresh.statusCode).toBe(400);
    expect(refresh.json()).toMatchObject({ error: 'invalid_target' });
  });

  it('a redirect URI the client did not register is shown to the person, never redirected to', async () => {
    const clientId = await register();
    const { cookie } = await signIn(adminKey);
    const res = await authorizePage(cookie, authParams(clientId, pkce().challenge, { redirect_uri: 'https://evil.example/cb' }));
    expect(res.statusCode).toBe(400);
    expect(res.headers.location).toBeUndefined();
    expect(res.body).toContain('redirect_uri is not one the app registered');
    // Nor may a client register one a browser would run as script.
    const bad = await server.app.inject({
      method: 'POST',
      url: '/oauth/register',
      headers: { host: HOST },
      payload: { redirect_uris: ['javascript:alert(1)'], token_endpoint_auth_method: 'none' },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ error: 'invalid_client_metadata' });
  });

  it('nobody but a member signs in to consent: signed out goes to the sign-in form, an agent key is refused there', async () => {
    const clientId = await register();
    const signedOut = await authorizePage(undefined, authParams(clientId, pkce().challenge));
    expect(signedOut.statusCode).toBe(303);
    expect(signedOut.headers.location).toMatch(/^\/sign-in\?next=%2Foauth%2Fauthorize/);
    const agent = await signIn(agentKey);
    expect(agent.status).toBe(401);
    expect(agent.cookie).toBeUndefined();
  });

  it('PKCE plain, or none, is refused with invalid_request; Deny answers access_denied', async () => {
    const clientId = await register();
    const { cookie } = await signIn(adminKey);
    const { verifier } = pkce();
    const tries: Record<string, string>[] = [{ code_challenge_method: 'plain', code_challenge: verifier }, { code_challenge_method: '' }];
    for (const extra of tries) {
      const res = await authorizePage(cookie, authParams(clientId, verifier, extra));
      expect(res.statusCode).toBe(400);
      expect(linkBack(res.body).searchParams.get('error')).toBe('invalid_request');
    }
    const denied = await consent(cookie!, authParams(clientId, pkce().challenge), 'deny');
    expect(denied.searchParams.get('error')).toBe('access_denied');
    expect(denied.searchParams.get('code')).toBeNull();
  });

  it('a member removed from the workspace takes their grants with them', async () => {
    const key = (await server.members.add('acme', 'cy', 'member')).key;
    const clientId = await register();
    const { cookie } = await signIn(key);
    const { verifier, challenge } = pkce();
    const code = (await consent(cookie!, authParams(clientId, challenge))).searchParams.get('code')!;
    const tokens = (await token({ grant_type: 'authorization_code', client_id: clientId, redirect_uri: CALLBACK, code, code_verifier: verifier })).json<{
      access_token: string;
    }>();
    expect((await mcp(tokens.access_token)).statusCode).toBe(200);
    await server.members.revoke('acme', 'cy');
    await server.members.add('acme', 'cy', 'member');
    expect((await mcp(tokens.access_token)).statusCode).toBe(401);
  });

  it('members revoke ends the member’s grants at once, refresh included; a member re-added under the name sees none of them', async () => {
    const key = (await server.members.add('acme', 'dee', 'member')).key;
    const flow = oauthFlow(() => server);
    const first = await flow.signedIn(key);
    const second = await flow.signedIn(key);
    const out = new PassThrough();
    let said = '';
    out.on('data', (c: Buffer) => {
      said += c.toString();
    });
    expect(await revokeMember({ config: box.config, stdout: out, stderr: new PassThrough() }, { workspace: 'acme', name: 'dee' })).toBe(0);
    expect(said).toContain('its 2 OAuth grant(s) ended');
    for (const { clientId, tokens } of [first, second]) {
      expect((await mcp(tokens.access_token)).statusCode).toBe(401);
      const refresh = await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: tokens.refresh_token });
      expect(refresh.json()).toMatchObject({ error: 'invalid_grant' });
    }
    const again = (await server.members.add('acme', 'dee', 'member')).key;
    const { cookie } = await signIn(again);
    const apps = await server.app.inject({ url: '/apps', headers: { host: HOST, cookie } });
    expect(apps.body).not.toContain('data-grant=');
  });

  it('a grant outlives no member: revoked in the registry alone, its refresh token is refused and the re-added member does not see it', async () => {
    const key = (await server.members.add('acme', 'eve', 'member')).key;
    const { clientId, tokens } = await oauthFlow(() => server).signedIn(key);
    await server.members.revoke('acme', 'eve');
    const again = (await server.members.add('acme', 'eve', 'member')).key;
    const refresh = await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: tokens.refresh_token });
    expect(refresh.json()).toMatchObject({ error: 'invalid_grant' });
    const { cookie } = await signIn(again);
    const apps = await server.app.inject({ url: '/apps', headers: { host: HOST, cookie } });
    expect(apps.body).not.toContain('data-grant=');
  });

  it('a token request must repeat the redirect_uri its authorization request named (OAuth 2.1 §4.1.3)', async () => {
    const clientId = await register();
    const { cookie } = await signIn(adminKey);
    const { verifier, challenge } = pkce();
    const code = (await consent(cookie!, authParams(clientId, challenge))).searchParams.get('code')!;
    const without = await token({ grant_type: 'authorization_code', client_id: clientId, code, code_verifier: verifier });
    expect(without.statusCode).toBe(400);
    expect(without.json()).toMatchObject({ error: 'invalid_request' });
    // A request that named none (the client's only URI) needs none at the token endpoint.
    const { redirect_uri: _, ...unnamed } = authParams(clientId, challenge);
    const code2 = (await consent(cookie!, unnamed)).searchParams.get('code')!;
    const ok = await token({ grant_type: 'authorization_code', client_id: clientId, code: code2, code_verifier: verifier });
    expect(ok.statusCode).toBe(200);
  });

  it('a code is redeemed only by the client it was issued to', async () => {
    const clientId = await register();
    const other = await register();
    const { cookie } = await signIn(adminKey);
    const { verifier, challenge } = pkce();
    const code = (await consent(cookie!, authParams(clientId, challenge))).searchParams.get('code')!;
    const res = await token({ grant_type: 'authorization_code', client_id: other, redirect_uri: CALLBACK, code, code_verifier: verifier });
    expect(res.json()).toMatchObject({ error: 'invalid_grant' });
    const unknown = await token({
      grant_type: 'authorization_code',
      client_id: 'adbc_nobodyregisteredthis',
      redirect_uri: CALLBACK,
      code,
      code_verifier: verifier,
    });
    expect(unknown.statusCode).toBe(401);
    expect(unknown.json()).toMatchObject({ error: 'invalid_client' });
  });
});
