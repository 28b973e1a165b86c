import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, expect, it } from 'vitest';
import { WebSessions } from '../../src/http/web/web-sessions.ts';
import { keysFor } from '../../src/redis/keys.ts';

// H1 (high; fixed on f-H in 37d7f1e). POST /sign-in with a member key makes a session in Redis
// for WEB_SESSION_TTL_S (8 h) every time, without bound, in no workspace's budget and under no
// rate limit. Measured against `agentdb start` (one client, 20 at a time): 2,000 sign-ins in
// 5.3 s (379/s), 2,000 keys, used_memory +840 KB (420 B each, TTL 28,800 s): ~4.6 GB in 8 h,
// so the headroom refuses every workspace's calls (UNAVAILABLE) within about 20 min of a 1 GB
// maxmemory. On main this fails with 1,000 session keys for one member.
const prefix = `review-h1-${randomUUID()}`;
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
afterAll(async () => {
  const doomed = await redis.keys(`${prefix}:*`);
  if (doomed.length > 0) await redis.del(...doomed);
  redis.disconnect();
});

it('one member signing in 1,000 times keeps a bounded number of sessions in Redis', async () => {
  const sessions = new WebSessions(redis, keysFor(prefix), 28_800);
  for (let i = 0; i < 1000; i++) await sessions.create({ keyHash: 'h', workspace: 'evil', name: 'mallory' });
  const kept = (await redis.keys(`${prefix}:{web}:session:*`)).length;
  expect(kept).toBeLessThanOrEqual(50);
});
