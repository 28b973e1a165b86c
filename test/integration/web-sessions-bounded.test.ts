import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_SESSIONS_PER_MEMBER, WebSessions } from '../../src/registry/web-sessions.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { REDIS_URL } from '../helpers/harness.ts';

// Hostile review of issue 27: each sign-in with a member key made a session in Redis for
// WEB_SESSION_TTL_S (8 h), without bound (379 sign-ins a second from one client, 420 bytes
// each: about 4.6 GB in 8 h, in no workspace's Redis budget). A member keeps at most
// MAX_SESSIONS_PER_MEMBER; the oldest end first, and the others' sessions are untouched.
const prefix = `t-websess-${randomUUID()}`;
const keys = keysFor(prefix);
let redis: Redis;
let sessions: WebSessions;

async function sessionKeys(): Promise<number> {
  let n = 0;
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}:{web}:session:*`, 'COUNT', 1000);
    cursor = next;
    n += found.length;
  } while (cursor !== '0');
  return n;
}

beforeAll(() => {
  redis = new Redis(REDIS_URL);
  sessions = new WebSessions(redis, keys, 3600);
});

afterAll(async () => {
  const doomed = await redis.keys(`${prefix}:*`);
  if (doomed.length > 0) await redis.del(...doomed);
  redis.disconnect();
});

describe('web sessions per member', () => {
  it('keeps at most MAX_SESSIONS_PER_MEMBER of one member, ending the oldest, and leaves other members alone', async () => {
    const other = await sessions.create({ keyHash: 'h2', workspace: 'acme', name: 'bob' });
    const first = await sessions.create({ keyHash: 'h1', workspace: 'evil', name: 'mallory' });
    for (let i = 0; i < 200; i++) await sessions.create({ keyHash: 'h1', workspace: 'evil', name: 'mallory' });
    const last = await sessions.create({ keyHash: 'h1', workspace: 'evil', name: 'mallory' });

    expect(await sessionKeys()).toBe(MAX_SESSIONS_PER_MEMBER + 1);
    expect(await redis.zcard(keys.webMemberSessions('evil', 'mallory'))).toBe(MAX_SESSIONS_PER_MEMBER);
    expect(await sessions.get(first.id)).toBeUndefined();
    expect((await sessions.get(last.id))?.name).toBe('mallory');
    expect((await sessions.get(other.id))?.name).toBe('bob');
  });

  it('signing out takes the session out of its member count too', async () => {
    const s = await sessions.create({ keyHash: 'h3', workspace: 'acme', name: 'carol' });
    await sessions.destroy(s.id);
    expect(await sessions.get(s.id)).toBeUndefined();
    expect(await redis.zcard(keys.webMemberSessions('acme', 'carol'))).toBe(0);
  });
});
