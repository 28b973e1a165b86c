import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { OAuthClient } from '../../src/oauth/oauth-clients.ts';
import { OAuthGrants } from '../../src/oauth/oauth-grants.ts';
import { s256 } from '../../src/oauth/oauth-token-format.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentKeyRing } from '../../src/registry/agent-keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { KeyAuthenticator, type Principal } from '../../src/registry/principal.ts';
import { PrincipalCache } from '../../src/registry/principal-cache.ts';
import { forgetMessage, workspaceChanged } from '../../src/registry/registry-changes.ts';
import { WorkspaceRegistry } from '../../src/registry/workspaces.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { OAUTH_RESOURCE, OAUTH_VERIFIER } from '../helpers/oauth-sign-in.ts';
import { countCommands } from '../helpers/redis-commands.ts';

// Session 37, T19: every change a workspace's admin (or the operator) makes to its keys, members,
// agents or the workspace itself was announced as a registry change that dropped the whole key
// cache in every HTTP process, so one admin changing their own members in a loop made every
// tenant's keys be looked up in Redis again on their next request (4-5 commands a key). Only the
// changed workspace's entries go now; its revoked keys and members are still refused at once.

let sb: Sandbox;
let redis: Redis;
/** Commands sent on `redis`, which the authenticator and the registries use. */
let sent: () => number;
let principals: PrincipalCache;
let auth: KeyAuthenticator;
let members: MemberRegistry;
let agents: AgentRegistry;
let ring: AgentKeyRing;
let workspaces: WorkspaceRegistry;
let channel: string;

beforeAll(async () => {
  sb = sandbox();
  redis = new Redis(REDIS_URL);
  sent = countCommands(redis);
  const keys = keysFor(sb.config.prefix);
  channel = keys.registryChanges;
  principals = new PrincipalCache(new Redis(REDIS_URL), channel, 60_000);
  await principals.start();
  auth = new KeyAuthenticator(redis, keys, principals);
  members = new MemberRegistry(redis, keys);
  agents = new AgentRegistry(redis, keys);
  ring = new AgentKeyRing(redis, keys, agents);
  workspaces = new WorkspaceRegistry(redis, keys);
  for (const ws of ['acme', 'other']) await heard(() => workspaces.put(ws, 'pro'));
});
afterAll(async () => {
  principals.close();
  await redis.quit();
  await sb.cleanup();
});

/** Runs `change` and waits until the cache has heard of it (an event, never a sleep). */
async function heard(change: () => Promise<unknown>): Promise<void> {
  const dropped = principals.changed();
  await change();
  await dropped;
}

/** A new member's key, once the cache has heard of the addition (else it may refuse to keep its first lookup). */
async function added(workspace: string, name: string, role: 'member' | 'admin'): Promise<string> {
  let key = '';
  await heard(async () => {
    key = (await members.add(workspace, name, role)).key;
  });
  return key;
}

/** The principal of `key`, and how many commands finding it sent to Redis. */
async function who(key: string): Promise<{ principal: Principal | undefined; commands: number }> {
  const before = sent();
  const principal = await auth.authenticate(key);
  return { principal, commands: sent() - before };
}

it("one workspace's changes to its keys, members, agents and itself leave other workspaces' cached keys cached", async () => {
  await heard(() => agents.put('other', 'scout', { displayName: 'Scout', settings: { database: 'agent' } }));
  const otherAgent = (await ring.mint('other', 'scout')).key;
  let otherMember = '';
  await heard(async () => {
    otherMember = (await members.add('other', 'ola', 'member')).key;
  });
  const theirs = [(await who(otherAgent)).principal, (await who(otherMember)).principal];
  expect(theirs).toMatchObject([
    { kind: 'agent', workspace: 'other' },
    { kind: 'member', workspace: 'other' },
  ]);
  expect((await who(otherAgent)).commands).toBe(0);

  // What one admin of acme can do at will (members, the operator's part too), each heard by the cache before the next.
  await heard(() => members.add('acme', 'eve', 'admin'));
  await heard(() => members.add('acme', 'mal', 'member'));
  await heard(() => members.revoke('acme', 'mal'));
  await heard(() => members.add('acme', 'mal', 'admin'));
  await heard(() => agents.put('acme', 'bot', { displayName: 'Bot', settings: { database: 'agent' } }));
  const bot = await ring.mint('acme', 'bot');
  await heard(() => ring.revoke('acme', bot.info.id));
  await heard(() => agents.remove('acme', 'bot'));
  await heard(() => workspaces.put('acme', 'business'));

  // main: each key was looked up in Redis again (4-5 commands).
  expect(await who(otherAgent)).toEqual({ principal: theirs[0], commands: 0 });
  expect(await who(otherMember)).toEqual({ principal: theirs[1], commands: 0 });
});

it("a workspace's revoked key, member, narrowed agent and its own removal still apply at its keys' next request", async () => {
  await heard(() => workspaces.put('mine', 'pro'));
  await heard(() => agents.put('mine', 'nosy', { displayName: 'Nosy', settings: { database: 'agent' } }));
  const agentKey = await ring.mint('mine', 'nosy');
  const memberKey = await added('mine', 'bo', 'admin');
  const otherKey = await added('mine', 'cy', 'member');
  for (const key of [agentKey.key, memberKey, otherKey]) expect((await who(key)).principal).toBeDefined();
  expect((await who(agentKey.key)).commands).toBe(0);

  await heard(() => agents.put('mine', 'nosy', { displayName: 'Nosy', settings: { database: 'off' } }));
  expect((await who(agentKey.key)).principal).toMatchObject({ settings: { database: 'off' } });
  await heard(() => ring.revoke('mine', agentKey.info.id));
  expect((await who(agentKey.key)).principal).toBeUndefined();
  await heard(() => members.revoke('mine', 'bo'));
  expect((await who(memberKey)).principal).toBeUndefined();
  expect((await who(otherKey)).principal).toBeDefined();
  await heard(() => workspaces.remove('mine'));
  await heard(() => members.revoke('mine', 'cy'));
  expect((await who(otherKey)).principal).toBeUndefined();
});

it('a lookup begun before its workspace changed does not put what it found; one of another workspace does', async () => {
  const mine = await added('acme', 'dee', 'member');
  const theirs = await added('other', 'dan', 'member');
  // Both looked up, and both lookups answered only after acme changed: dee's answer may be older
  // than the change, dan's cannot be touched by it.
  let release = () => {};
  const hold = new Promise<void>((resolve) => {
    release = resolve;
  });
  const slow = (key: string) =>
    principals.through(`slow ${key}`, async () => {
      const principal = await auth.authenticate(key);
      await hold;
      return principal && { principal };
    });
  const looking = [slow(mine), slow(theirs)];
  await heard(() => members.add('acme', 'zed', 'member'));
  release();
  await Promise.all(looking);
  expect(principals.get(`slow ${mine}`)).toBeUndefined();
  expect(principals.get(`slow ${theirs}`)).toMatchObject({ member: { name: 'dan' } });
});

it('a grant ended before its code was exchanged announces nothing: no cache drops for it', async () => {
  const client: OAuthClient = {
    clientId: 'adbc_onewsonewsonewsone',
    clientName: 'One',
    redirectUris: ['http://127.0.0.1/cb'],
    authMethod: 'none',
    createdAt: 0,
  };
  const grants = new OAuthGrants(redis, keysFor(sb.config.prefix), members, { accessTtlS: 600, refreshTtlS: 3600, principals, now: () => Date.now() });
  await added('acme', 'ada', 'admin');
  const ada = (await members.get('acme', 'ada'))!;
  const otherKey = await added('other', 'oz', 'member');
  const principal = (await who(otherKey)).principal;
  expect(principal).toBeDefined();
  await grants.consent(ada, client, {
    redirectUri: client.redirectUris[0]!,
    redirectUriGiven: true,
    challenge: s256(OAUTH_VERIFIER),
    resource: OAUTH_RESOURCE,
    level: 'write',
  });
  const grant = (await grants.list('acme', 'ada'))[0]!;
  await grants.revoke('acme', 'ada', grant.id);
  // A message of one's own after it, on the same channel: heard after whatever the revoke sent.
  await heard(() => redis.publish(channel, forgetMessage('nothing ')));
  // main: the grant's end dropped every cached key.
  expect(await who(otherKey)).toEqual({ principal, commands: 0 });
});

it("a workspace's change still ends its entries after a full cache was emptied to make room", async () => {
  const small = new PrincipalCache(new Redis(REDIS_URL), channel, 60_000, 2);
  await small.start();
  try {
    const member = (workspace: string, name: string): Principal => ({ kind: 'member', workspace, member: { name, role: 'member' } }) as Principal;
    // The third entry empties both maps (at 2), the fourth is put beside it.
    for (const [key, ws] of [
      ['a', 'acme'],
      ['b', 'other'],
      ['c', 'acme'],
      ['d', 'acme'],
    ] as const)
      small.put(key, member(ws, key), small.mark());
    expect([small.get('c'), small.get('d')]).toMatchObject([{ workspace: 'acme' }, { workspace: 'acme' }]);
    const heardIt = small.changed();
    await redis.publish(channel, workspaceChanged('acme'));
    await heardIt;
    expect([small.get('a'), small.get('c'), small.get('d')]).toEqual([undefined, undefined, undefined]);
  } finally {
    small.close();
  }
});
