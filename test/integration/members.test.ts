import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemberRegistry } from '../../src/registry/members.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

let sb: Sandbox;
let redis: Redis;
let members: MemberRegistry;

beforeAll(() => {
  sb = sandbox();
  redis = new Redis(REDIS_URL);
  members = new MemberRegistry(redis, keysFor(sb.config.prefix));
});
afterAll(async () => {
  redis.disconnect();
  await sb.cleanup();
});

/** Every string value under the sandbox's prefix, whatever the key's type. */
async function allStoredText(prefix: string): Promise<string> {
  const parts: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    for (const k of keys) {
      const type = await redis.type(k);
      if (type === 'hash') parts.push(k, ...Object.entries(await redis.hgetall(k)).flat());
      else if (type === 'string') parts.push(k, (await redis.get(k)) ?? '');
      else parts.push(k);
    }
  } while (cursor !== '0');
  return parts.join('\n');
}

describe('MemberRegistry', () => {
  it('adds a member with a one-time adb_ key that authenticates as that member', async () => {
    const { member, key } = await members.add('acme', 'ada', 'admin');
    expect(key).toMatch(/^adb_[A-Za-z0-9_-]{32,}$/);
    expect(member).toEqual({ workspace: 'acme', name: 'ada', role: 'admin', createdAt: expect.any(Number) });
    expect(await members.get('acme', 'ada')).toEqual(member);
    expect(await members.authenticate(key)).toEqual(member);
  });

  it('never stores a key in clear, only its sha256', async () => {
    const { key } = await members.add('acme', 'grace', 'member');
    const stored = await allStoredText(sb.config.prefix);
    expect(stored).not.toContain(key);
    expect(stored).not.toContain(key.slice(4));
    expect(stored).toContain(createHash('sha256').update(key).digest('hex'));
  });

  it('mints a different key for every member', async () => {
    const a = await members.add('keys', 'one', 'member');
    const b = await members.add('keys', 'two', 'member');
    expect(a.key).not.toBe(b.key);
    expect((await members.authenticate(b.key))?.name).toBe('two');
  });

  it('refuses a name that is already active, and bad names or roles', async () => {
    const { key } = await members.add('dupes', 'lin', 'member');
    // Already there: a conflict, not a bad argument (review N10), and the first key still works.
    await expect(members.add('dupes', 'lin', 'admin')).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    expect((await members.get('dupes', 'lin'))?.role).toBe('member');
    expect((await members.authenticate(key))?.name).toBe('lin');
    await expect(members.add('dupes', 'Bad Name', 'member')).rejects.toMatchObject({ code: 'INVALID_ARGUMENTS' });
    await expect(members.add('../x', 'lin', 'member')).rejects.toMatchObject({ code: 'INVALID_ARGUMENTS' });
    await expect(members.add('dupes', 'kai', 'owner' as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENTS' });
    expect(await members.get('dupes', 'kai')).toBeUndefined();
  });

  it('lets exactly one of two racing adds of the same name win', async () => {
    const results = await Promise.allSettled([members.add('race', 'sam', 'member'), members.add('race', 'sam', 'admin')]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const won = results.find((r) => r.status === 'fulfilled')!;
    const key = (won as PromiseFulfilledResult<{ key: string }>).value.key;
    expect((await members.authenticate(key))?.name).toBe('sam');
  });

  it('revokes: the key stops working at once, get finds nobody, list still shows it', async () => {
    const { key } = await members.add('rev', 'max', 'member');
    expect(await members.revoke('rev', 'max')).toBe(true);
    expect(await members.authenticate(key)).toBeUndefined();
    expect(await members.get('rev', 'max')).toBeUndefined();
    expect(await members.revoke('rev', 'max')).toBe(false);
    expect(await members.revoke('rev', 'nobody')).toBe(false);
    expect(await members.list('rev')).toEqual([expect.objectContaining({ name: 'max', revoked: true })]);
  });

  it('re-adds a revoked name with a new key; the old key stays dead', async () => {
    const first = await members.add('readd', 'zoe', 'member');
    await members.revoke('readd', 'zoe');
    const second = await members.add('readd', 'zoe', 'admin');
    expect(second.key).not.toBe(first.key);
    expect(await members.authenticate(first.key)).toBeUndefined();
    expect(await members.authenticate(second.key)).toMatchObject({ name: 'zoe', role: 'admin' });
    expect(await members.list('readd')).toEqual([expect.objectContaining({ name: 'zoe', role: 'admin', revoked: false })]);
  });

  it('answers undefined for unknown and malformed keys', async () => {
    for (const bad of ['', 'adb_', 'adb_short', `xyz_${'a'.repeat(43)}`, `adb_${'a'.repeat(43)}`, `adb_${'!'.repeat(43)}`, `adb_${'a'.repeat(500)}`]) {
      expect(await members.authenticate(bad), bad).toBeUndefined();
    }
    expect(await members.authenticate(undefined as never)).toBeUndefined();
  });

  it('keeps workspaces apart: same name, different members and keys', async () => {
    const a = await members.add('north', 'kim', 'admin');
    const b = await members.add('south', 'kim', 'member');
    expect(await members.authenticate(a.key)).toMatchObject({ workspace: 'north', role: 'admin' });
    expect(await members.authenticate(b.key)).toMatchObject({ workspace: 'south', role: 'member' });
    await members.revoke('north', 'kim');
    expect(await members.authenticate(b.key)).toMatchObject({ workspace: 'south' });
  });

  it('lists a workspace by name, with roles and revocation', async () => {
    await members.add('team', 'bo', 'member');
    await members.add('team', 'al', 'admin');
    await members.add('team', 'cy', 'member');
    await members.revoke('team', 'cy');
    const list = await members.list('team');
    expect(list.map((m) => [m.name, m.role, m.revoked])).toEqual([
      ['al', 'admin', false],
      ['bo', 'member', false],
      ['cy', 'member', true],
    ]);
    expect(await members.list('empty')).toEqual([]);
  });

  it('survives a new registry over the same Redis (durable, nothing held in memory)', async () => {
    const { key } = await members.add('durable', 'ed', 'member');
    const again = new MemberRegistry(redis, keysFor(sb.config.prefix));
    expect(await again.authenticate(key)).toMatchObject({ workspace: 'durable', name: 'ed' });
  });
});
