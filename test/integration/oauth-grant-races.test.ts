import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { OAuthClient } from '../../src/oauth/oauth-clients.ts';
import { OAuthGrants } from '../../src/oauth/oauth-grants.ts';
import { s256 } from '../../src/oauth/oauth-token-format.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { type Member, MemberRegistry } from '../../src/registry/members.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { OAUTH_RESOURCE, OAUTH_VERIFIER, signInTo } from '../helpers/oauth-sign-in.ts';

// Hostile review T1 (session 26): a token request read the grant, then wrote it back with its
// new tokens. A person's revoke (Connected apps) landing between the two was undone: the grant
// came back, out of the member's list (so no longer shown nor revocable there), and its client,
// refreshing in a loop, kept it alive for good. Here the revoke is made to land exactly there:
// while the token request looks the member up, the step between the read and the write.

/** The registry, with a step of the test's own run once, the next time a member is looked up. */
class SteppedMembers extends MemberRegistry {
  step?: () => Promise<void>;
  override async get(workspace: string, name: string): Promise<Member | undefined> {
    const step = this.step;
    this.step = undefined;
    if (step) await step();
    return super.get(workspace, name);
  }
}

let sb: Sandbox;
let redis: Redis;
let members: SteppedMembers;
let grants: OAuthGrants;
let member: Member;
const client: OAuthClient = { clientId: 'adbc_racerracerracer', clientName: 'Racer', redirectUris: ['http://127.0.0.1/cb'], authMethod: 'none', createdAt: 0 };
const verifier = OAUTH_VERIFIER;
const resource = OAUTH_RESOURCE;

beforeAll(async () => {
  sb = sandbox();
  redis = new Redis(REDIS_URL);
  const keys = keysFor(sb.config.prefix);
  members = new SteppedMembers(redis, keys);
  member = (await members.add('acme', 'mallory', 'member')).member;
  grants = new OAuthGrants(redis, keys, members, { accessTtlS: 3600, refreshTtlS: 86_400 });
});
afterAll(async () => {
  await redis.quit();
  await sb.cleanup();
});

async function signIn() {
  return signInTo(grants, member, client);
}

it('a grant revoked while a refresh of it is under way stays revoked: the refresh is refused, no token of it works', async () => {
  const first = await signIn();
  const [grant] = await grants.list('acme', 'mallory');
  members.step = async () => {
    expect(await grants.revoke('acme', 'mallory', grant!.id)).toBe(true);
  };
  await expect(grants.refresh(client, { refreshToken: first.refresh_token })).rejects.toMatchObject({ errorCode: 'invalid_grant' });
  expect(await grants.authenticate(first.access_token, resource)).toBeUndefined();
  expect(await redis.exists(keysFor(sb.config.prefix).oauth('grant', grant!.id))).toBe(0);
});

it('a grant revoked while its code is being exchanged stays revoked', async () => {
  const code = await grants.consent(member, client, {
    redirectUri: client.redirectUris[0]!,
    redirectUriGiven: true,
    challenge: s256(verifier),
    resource,
    level: 'write',
  });
  const grant = (await grants.list('acme', 'mallory')).find((g) => g.clientId === client.clientId)!;
  members.step = async () => {
    expect(await grants.revoke('acme', 'mallory', grant.id)).toBe(true);
  };
  await expect(grants.exchangeCode(client, { code, verifier, redirectUri: client.redirectUris[0]! })).rejects.toMatchObject({ errorCode: 'invalid_grant' });
  expect(await redis.exists(keysFor(sb.config.prefix).oauth('grant', grant.id))).toBe(0);
});
