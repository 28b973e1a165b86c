import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { OAuthClient } from '../../src/oauth/oauth-clients.ts';
import { OAuthGrants } from '../../src/oauth/oauth-grants.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { type Member, MemberRegistry } from '../../src/registry/members.ts';
import { PrincipalCache } from '../../src/registry/principal-cache.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { OAUTH_RESOURCE, signInTo } from '../helpers/oauth-sign-in.ts';
import { countCommands } from '../helpers/redis-commands.ts';

// A person's MCP client signed in with OAuth sends its access token with every request: who it
// acts for took three Redis lookups in turn (the token, its grant, the member) on each, where a
// key's request takes none once its key is cached. Access tokens now share that cache; whatever
// ends a token (a revoked grant, a refresh replacing it, the client revoking it, the member
// leaving, its expiry) must still refuse its very next request.

let sb: Sandbox;
let redis: Redis;
/** Commands sent on `redis`, which the grants and the member registry use. */
let sent: () => number;
let principals: PrincipalCache;
let members: MemberRegistry;
let grants: OAuthGrants;
let member: Member;
let skew = 0;
const client: OAuthClient = {
  clientId: 'adbc_cachedcachedcach',
  clientName: 'Cached',
  redirectUris: ['http://127.0.0.1/cb'],
  authMethod: 'none',
  createdAt: 0,
};
const resource = OAUTH_RESOURCE;

beforeAll(async () => {
  sb = sandbox();
  redis = new Redis(REDIS_URL);
  sent = countCommands(redis);
  const keys = keysFor(sb.config.prefix);
  principals = new PrincipalCache(new Redis(REDIS_URL), keys.registryChanges, 60_000);
  await principals.start();
  members = new MemberRegistry(redis, keys);
  member = (await members.add('acme', 'ada', 'admin')).member;
  grants = new OAuthGrants(redis, keys, members, { accessTtlS: 600, refreshTtlS: 3600, principals, now: () => Date.now() + skew });
});
afterAll(async () => {
  principals.close();
  await redis.quit();
  await sb.cleanup();
});

async function signIn(who = member) {
  return signInTo(grants, who, client);
}

/** Runs `change` and waits until the cache has heard of it (an event, never a sleep). */
async function heard(change: () => Promise<unknown>): Promise<void> {
  const dropped = principals.changed();
  await change();
  await dropped;
}

it("a token's next request is answered without asking Redis, for its own resource only", async () => {
  const { access_token } = await signIn();
  const first = await grants.authenticate(access_token, resource);
  expect(first).toMatchObject({ kind: 'member', workspace: 'acme', member: { name: 'ada', role: 'admin', granted: 'write' } });
  const before = sent();
  expect(await grants.authenticate(access_token, resource)).toEqual(first);
  expect(sent() - before).toBe(0);
  expect(await grants.authenticate(access_token, 'http://agentdb.test/mcp/w/other')).toBeUndefined();
});

it('a revoked grant refuses its token at once', async () => {
  const { access_token } = await signIn();
  expect(await grants.authenticate(access_token, resource)).toBeDefined();
  const grant = (await grants.list('acme', 'ada'))[0]!;
  await heard(() => grants.revoke('acme', 'ada', grant.id));
  expect(await grants.authenticate(access_token, resource)).toBeUndefined();
});

it('a refresh ends the access token it replaces at once; the new one works', async () => {
  const first = await signIn();
  expect(await grants.authenticate(first.access_token, resource)).toBeDefined();
  let next: Awaited<ReturnType<OAuthGrants['refresh']>> | undefined;
  await heard(async () => {
    next = await grants.refresh(client, { refreshToken: first.refresh_token! });
  });
  expect(await grants.authenticate(first.access_token, resource)).toBeUndefined();
  expect(await grants.authenticate(next!.access_token, resource)).toMatchObject({ member: { name: 'ada' } });
});

it('an access token the client revokes is refused at once', async () => {
  const { access_token } = await signIn();
  expect(await grants.authenticate(access_token, resource)).toBeDefined();
  await heard(() => grants.revokeToken(client, access_token));
  expect(await grants.authenticate(access_token, resource)).toBeUndefined();
});

it("a member's removal refuses their tokens at once", async () => {
  const { member: bo } = await members.add('acme', 'bo', 'member');
  const { access_token } = await signIn(bo);
  expect(await grants.authenticate(access_token, resource)).toMatchObject({ member: { name: 'bo' } });
  await heard(() => members.revoke('acme', 'bo'));
  expect(await grants.authenticate(access_token, resource)).toBeUndefined();
});

it('an expired token is refused though it was cached a moment before', async () => {
  const { access_token } = await signIn();
  expect(await grants.authenticate(access_token, resource)).toBeDefined();
  skew += 601_000;
  try {
    expect(await grants.authenticate(access_token, resource)).toBeUndefined();
  } finally {
    skew = 0;
  }
});

// Session 37, T18: every ended access token was announced as a registry change that dropped the
// whole cache in every process, so one person's client refreshing (or revoking its token, or
// ending a grant) in a loop made every tenant's keys and tokens be looked up in Redis again on
// their next request. Only the ended token's entries go now.
it("an access token ended by a refresh, its client or its grant's end leaves others' cached keys and tokens cached", async () => {
  const { member: cy } = await members.add('acme', 'cy', 'member');
  const other = await signIn(cy);
  const others = await grants.authenticate(other.access_token, resource);
  expect(others).toMatchObject({ member: { name: 'cy' } });
  // An agent key's entry, as the key authenticator keeps it.
  await principals.through('agent key hash', async () => ({ principal: others! }));

  const mine = await signIn();
  expect(await grants.authenticate(mine.access_token, resource)).toBeDefined();
  let next: Awaited<ReturnType<OAuthGrants['refresh']>> | undefined;
  await heard(async () => {
    next = await grants.refresh(client, { refreshToken: mine.refresh_token! });
  });
  expect(await grants.authenticate(next!.access_token, resource)).toBeDefined();
  await heard(() => grants.revokeToken(client, next!.access_token));
  const again = await signIn();
  expect(await grants.authenticate(again.access_token, resource)).toBeDefined();
  const grant = (await grants.list('acme', 'ada')).find((g) => g.clientId === client.clientId && g.id !== undefined)!;
  await heard(() => grants.revoke('acme', 'ada', grant.id));

  // Each ended token is refused at once.
  expect(await grants.authenticate(mine.access_token, resource)).toBeUndefined();
  expect(await grants.authenticate(next!.access_token, resource)).toBeUndefined();
  const before = sent();
  // main: cy's token was looked up again (three commands) and the key's entry was gone.
  expect(await grants.authenticate(other.access_token, resource)).toEqual(others);
  expect(sent() - before).toBe(0);
  expect(principals.get('agent key hash')).toEqual(others);
});
