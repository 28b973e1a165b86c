import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { OAuthClient } from '../../src/oauth/oauth-clients.ts';
import { MAX_GRANTS_PER_MEMBER, MAX_TOKEN_RECORDS_PER_GRANT, OAuthGrants } from '../../src/oauth/oauth-grants.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { type Member, MemberRegistry } from '../../src/registry/members.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { OAUTH_RESOURCE, signInTo } from '../helpers/oauth-sign-in.ts';

// Hostile review T14 (session 35): a refresh rotates its token and keeps the spent one's record,
// marked, for the rest of the refresh lifetime (30 days), so that a copy shown again ends the
// grant. One grant refreshed in a loop kept a 168-byte key a refresh for 30 days, and a grant
// ended (its member's 51st sign-in) left its tokens' records to lapse by themselves: bounded only
// by the token endpoint's rate per address (60 a minute), ~2.6 million keys a month from one
// address, in no workspace's budget. A grant's records are now bounded, and go with it.

let sb: Sandbox;
let redis: Redis;
let grants: OAuthGrants;
let member: Member;
let prefix: string;
const client: OAuthClient = { clientId: 'adbc_boundboundbound', clientName: 'Bound', redirectUris: ['http://127.0.0.1/cb'], authMethod: 'none', createdAt: 0 };
const resource = OAUTH_RESOURCE;
let clock = 1_000_000;

beforeAll(async () => {
  sb = sandbox();
  redis = new Redis(REDIS_URL);
  prefix = sb.config.prefix;
  const keys = keysFor(prefix);
  const members = new MemberRegistry(redis, keys);
  member = (await members.add('acme', 'mallory', 'member')).member;
  // Access tokens of a minute: the test's clock moves past each so that refreshes are not a burst.
  grants = new OAuthGrants(redis, keys, members, { accessTtlS: 60, refreshTtlS: 30 * 86_400, now: () => clock });
});
afterAll(async () => {
  const left = await redis.keys(`${prefix}:*`);
  if (left.length) await redis.del(...left);
  await redis.quit();
  await sb.cleanup();
});

async function signIn() {
  return signInTo(grants, member, client);
}

const count = async (kind: string) => (await redis.keys(`${prefix}:{oauth}:${kind}:*`)).length;

it("a grant refreshed again and again keeps a bounded number of its tokens' records, and the last spent one still ends it", async () => {
  let tokens = await signIn();
  let spent = tokens.refresh_token;
  for (let i = 0; i < 300; i++) {
    clock += 61_000;
    spent = tokens.refresh_token;
    tokens = await grants.refresh(client, { refreshToken: spent });
  }
  // main: 301 (every refresh token of the grant, 300 of them spent, each kept 30 days).
  expect(await count('refresh')).toBeLessThanOrEqual(64);
  expect(await grants.authenticate(tokens.access_token, resource)).toBeDefined();
  // The token spent last, shown again, is still seen as copied: the grant ends.
  await expect(grants.refresh(client, { refreshToken: spent })).rejects.toMatchObject({ errorCode: 'invalid_grant' });
  expect(await grants.authenticate(tokens.access_token, resource)).toBeUndefined();
  expect(await count('refresh')).toBe(0);
});

it('a member signing in past their grants ends the oldest with every record of its codes and tokens', async () => {
  for (let i = 0; i < MAX_GRANTS_PER_MEMBER + 20; i++) {
    const t = await signIn();
    clock += 61_000;
    await grants.refresh(client, { refreshToken: t.refresh_token });
  }
  expect((await grants.list('acme', 'mallory')).length).toBe(MAX_GRANTS_PER_MEMBER);
  // main: 140 refresh records (two per sign-in, 40 of them of grants ended) and 70 spent codes.
  expect(await count('refresh')).toBe(2 * MAX_GRANTS_PER_MEMBER);
  expect(await count('code')).toBe(MAX_GRANTS_PER_MEMBER);
  expect(await count('access')).toBe(MAX_GRANTS_PER_MEMBER);
});

it('a grant refreshed past its bound within one access token life is asked to wait, its refresh token still good', async () => {
  const first = await signIn();
  let tokens = first;
  let refused: unknown;
  let refreshed = 0;
  for (let i = 0; i < 100 && !refused; i++) {
    try {
      tokens = await grants.refresh(client, { refreshToken: tokens.refresh_token });
      refreshed++;
    } catch (err) {
      refused = err;
    }
  }
  // main: all 100 refreshes within the same minute pass.
  expect(refused).toMatchObject({ errorCode: 'too_many_requests' });
  // The sign-in's code and first refresh token are among the 32 counted: 30 refreshes pass, and
  // the answer says what was counted (it said "refreshed 32 times" after 30; session 35, N11).
  expect(refreshed).toBe(MAX_TOKEN_RECORDS_PER_GRANT - 2);
  expect((refused as Error).message).toContain("its sign-in's code and refresh tokens included");
  expect((refused as { retryAfterS: number }).retryAfterS).toBeGreaterThan(0);
  // The token refused is not spent: once the minute has passed it refreshes.
  clock += 61_000;
  const next = await grants.refresh(client, { refreshToken: tokens.refresh_token });
  expect(await grants.authenticate(next.access_token, resource)).toBeDefined();
});
