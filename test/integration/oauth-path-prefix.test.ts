import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { HOST, linkBack, oauthFlow } from '../helpers/oauth-flow.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';

// PUBLIC_URL with a path (a proxy serving agentdb under /agentdb): every resource stands below
// it, so which ones a token is issued for cannot be read from the URL's path from its start.

const PUBLIC = 'https://x.example/agentdb';
let box: Sandbox;
let server: OAuthServer;
let adminKey: string;

beforeAll(async () => {
  box = sandbox();
  server = await startOAuthServer(box, { publicUrl: PUBLIC });
  adminKey = (await server.members.add('acme', 'ada', 'admin')).key;
}, 30_000);

afterAll(async () => {
  await server?.close();
  await box?.cleanup();
});

const { register, signIn, pkce, authorizePage, authParams, token, mcp } = oauthFlow(() => server);
const signedIn = (resource: string) => oauthFlow(() => server).signedIn(adminKey, { resource });

describe('OAuth under a PUBLIC_URL with a path', () => {
  it('issues tokens for <PUBLIC_URL>/mcp and /mcp/w/<own workspace>, each good at its endpoint', async () => {
    const plain = await signedIn(`${PUBLIC}/mcp`);
    expect((await mcp(plain.tokens.access_token)).statusCode).toBe(200);
    const pinned = await signedIn(`${PUBLIC}/mcp/w/acme`);
    expect((await mcp(pinned.tokens.access_token, '/mcp/w/acme')).statusCode).toBe(200);
    const refreshed = await token({ grant_type: 'refresh_token', client_id: pinned.clientId, refresh_token: pinned.tokens.refresh_token });
    expect(refreshed.statusCode).toBe(200);
  });

  it('refuses a team endpoint, another workspace and a resource outside PUBLIC_URL with invalid_target', async () => {
    const clientId = await register();
    const { cookie } = await signIn(adminKey);
    for (const resource of [`${PUBLIC}/mcp/t/sales`, `${PUBLIC}/mcp/w/other`, `https://x.example/mcp`, `http://${HOST}/mcp`]) {
      const res = await authorizePage(cookie, authParams(clientId, pkce().challenge, { resource }));
      expect(res.statusCode, resource).toBe(400);
      expect(linkBack(res.body).searchParams.get('error'), resource).toBe('invalid_target');
    }
  });

  // The refresh's check read the path from its start (/mcp/t/…): under /agentdb, a grant made
  // for a team endpoint before consent refused them was refreshed, a token good for nothing.
  it('refuses to refresh a grant made for a team endpoint', async () => {
    const made = await signedIn(`${PUBLIC}/mcp`);
    const keys = keysFor(box.config.prefix);
    const grantId = (await server.redis.zrevrange(keys.oauth('grants', 'acme/ada'), 0, 0))[0]!;
    const grant = JSON.parse((await server.redis.get(keys.oauth('grant', grantId)))!) as { resource: string };
    await server.redis.set(keys.oauth('grant', grantId), JSON.stringify({ ...grant, resource: `${PUBLIC}/mcp/t/sales` }), 'KEEPTTL');
    const refresh = await token({ grant_type: 'refresh_token', client_id: made.clientId, refresh_token: made.tokens.refresh_token });
    expect(refresh.statusCode).toBe(400);
    expect(refresh.json()).toMatchObject({ error: 'invalid_target' });
  });

  it('describes each MCP endpoint below PUBLIC_URL, and no other path', async () => {
    const get = (url: string) => server.app.inject({ url, headers: { host: HOST } });
    const team = await get('/.well-known/oauth-protected-resource/mcp/t/sales');
    expect(team.json()).toMatchObject({ resource: `${PUBLIC}/mcp/t/sales`, authorization_servers: [PUBLIC] });
    expect((await get('/.well-known/oauth-protected-resource')).json()).toMatchObject({ resource: `${PUBLIC}/mcp` });
    for (const path of ['/mcp/x/acme', '/mcp/w/Acme', '/agentdb/mcp', '/mcp/w/acme/x']) {
      expect((await get(`/.well-known/oauth-protected-resource${path}`)).statusCode, path).toBe(404);
    }
  });
});
