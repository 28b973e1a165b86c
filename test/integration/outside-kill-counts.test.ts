import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { KEPT_PER_WORKSPACE } from '../../src/executor/outside-kills.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { outsideKillCounts } from '../../src/redis/outside-kill-counts.ts';
import { deleteKeys, REDIS_URL } from '../helpers/harness.ts';

const prefix = `t-${randomUUID().slice(0, 12)}`;
const redis = connectRedis(REDIS_URL);
const keys = keysFor(prefix);
afterAll(async () => {
  await deleteKeys(prefix);
  redis.disconnect();
});

describe("a workspace's statements killed from outside, in Redis", () => {
  it('counts each statement within the window of its last kill, bounded per workspace, the hash expiring with the window', async () => {
    const counts = outsideKillCounts(redis, keys);
    expect(await counts.note('ws1', 'stmt-a', 60_000, KEPT_PER_WORKSPACE)).toBe(1);
    expect(await counts.note('ws1', 'stmt-a', 60_000, KEPT_PER_WORKSPACE)).toBe(2);
    // Another workspace's statement of the same digest is its own.
    expect(await counts.note('ws2', 'stmt-a', 60_000, KEPT_PER_WORKSPACE)).toBe(1);
    // Past the window since its last kill, a kill counts from 1 again.
    expect(await counts.note('ws3', 'stmt-b', 1, KEPT_PER_WORKSPACE)).toBe(1);
    await expect.poll(async () => redis.exists(keys.outsideKills('ws3')), { interval: 5, timeout: 2000 }).toBe(0);
    expect(await counts.note('ws3', 'stmt-b', 1, KEPT_PER_WORKSPACE)).toBe(1);
    // A workspace killing many statements keeps the latest KEPT_PER_WORKSPACE.
    for (let i = 0; i < KEPT_PER_WORKSPACE + 10; i++) await counts.note('ws4', `many-${i}`, 60_000, KEPT_PER_WORKSPACE);
    expect(await redis.hlen(keys.outsideKills('ws4'))).toBe(KEPT_PER_WORKSPACE);
    expect(await redis.pttl(keys.outsideKills('ws4'))).toBeGreaterThan(50_000);
  });
});
