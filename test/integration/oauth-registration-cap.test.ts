import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_UNUSED_TTL_S } from '../../src/oauth/oauth-clients.ts';
import { OAuthGrants } from '../../src/oauth/oauth-grants.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { CALLBACK, HOST, oauthFlow } from '../helpers/oauth-flow.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';

// Issue 28, the leftovers: registration is limited per address (/64), but many addresses together
// could still fill Redis with registrations. The service keeps at most
// OAUTH_UNCONSENTED_CLIENTS_MAX clients nobody has signed in through; past it, 429 until one
// lapses (a day after registering) or someone signs in through one.

const CAP = 3;
let box: Sandbox;
let server: OAuthServer;
let memberKey: string;
const { signIn, pkce, consent, authParams } = oauthFlow(() => server);

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  server = await startOAuthServer(box, { unconsentedClientsMax: CAP });
  memberKey = (await server.members.add('acme', 'ada', 'member')).key;
}, 60_000);
afterAll(async () => {
  await server?.close();
  await box?.cleanup();
});

/** Registers from an address of its own (each its own /64): no per-address limit is met. */
let next = 0;
function registerFromAnywhere() {
  next++;
  return server.app.inject({
    method: 'POST',
    url: '/oauth/register',
    headers: { host: HOST },
    remoteAddress: `2001:db8:${next.toString(16)}::1`,
    payload: { client_name: 'Bot', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' },
  });
}

const unconsented = () => keysFor(box.config.prefix).oauth('clients', 'unconsented');

describe('the service-wide cap on unconsented OAuth clients', () => {
  it('past the cap, registration from any address answers 429 with when to try again; a consent frees a place, and so does a lapse', async () => {
    const ids: string[] = [];
    for (let i = 0; i < CAP; i++) {
      const res = await registerFromAnywhere();
      expect(res.statusCode).toBe(201);
      ids.push(res.json<{ client_id: string }>().client_id);
    }
    const full = await registerFromAnywhere();
    expect(full.statusCode).toBe(429);
    expect(full.json()).toMatchObject({ error: 'too_many_requests', error_description: expect.stringContaining(`at most ${CAP} registered apps`) });
    const retryAfter = Number(full.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(CLIENT_UNUSED_TTL_S - 120);
    expect(retryAfter).toBeLessThanOrEqual(CLIENT_UNUSED_TTL_S);
    // Nothing of the refused registration was kept.
    expect(await server.redis.zcard(unconsented())).toBe(CAP);

    // A person signs in through one: it is no longer unconsented, and its place is free.
    const { cookie } = await signIn(memberKey);
    const back = await consent(cookie!, authParams(ids[0]!, pkce().challenge));
    expect(back.searchParams.get('code')).toBeTruthy();
    expect(await server.redis.zscore(unconsented(), ids[0]!)).toBeNull();
    const freed = await registerFromAnywhere();
    expect(freed.statusCode).toBe(201);
    expect((await registerFromAnywhere()).statusCode).toBe(429);

    // One nobody used lapses (its record by its TTL, its place by its time): the place is free again.
    expect(await server.redis.ttl(keysFor(box.config.prefix).oauth('client', ids[1]!))).toBeGreaterThan(CLIENT_UNUSED_TTL_S - 120);
    await server.redis.zadd(unconsented(), Date.now() - 1, ids[1]!);
    expect((await registerFromAnywhere()).statusCode).toBe(201);
    expect(await server.redis.zscore(unconsented(), ids[1]!)).toBeNull();
  });
});

describe('a consented client whose grants have all ended', () => {
  // Hostile review T14 (session 35): a consent took the client out of the cap for good, and once
  // its grants ended it was kept a day more outside it, so a member consenting to registrations
  // from many addresses kept any number of them past OAUTH_UNCONSENTED_CLIENTS_MAX.
  it('takes a place among the unconsented again, so the cap holds', async () => {
    await server.redis.del(unconsented());
    const res = await registerFromAnywhere();
    expect(res.statusCode).toBe(201);
    const id = res.json<{ client_id: string }>().client_id;
    const { cookie } = await signIn(memberKey);
    expect((await consent(cookie!, authParams(id, pkce().challenge))).searchParams.get('code')).toBeTruthy();
    expect(await server.redis.zscore(unconsented(), id)).toBeNull();
    // Its one grant ends (as Disconnect under Connected apps ends it).
    const grants = new OAuthGrants(server.redis, keysFor(box.config.prefix), server.members, { accessTtlS: 3600, refreshTtlS: 3600 });
    const grant = (await grants.list('acme', 'ada')).find((g) => g.clientId === id);
    expect(await grants.revoke('acme', 'ada', grant!.id)).toBe(true);
    // main: null, the client kept a day outside the cap.
    expect(Number(await server.redis.zscore(unconsented(), id))).toBeGreaterThan(Date.now());
    for (let i = 1; i < CAP; i++) expect((await registerFromAnywhere()).statusCode).toBe(201);
    expect((await registerFromAnywhere()).statusCode).toBe(429);
  });
});
