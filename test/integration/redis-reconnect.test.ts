import { afterAll, beforeAll, expect, test } from 'vitest';
import { connectRedis, RECONNECT_MAX_MS } from '../../src/redis/connection.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

let redis: OwnRedis;
beforeAll(async () => {
  redis = await OwnRedis.start();
});
afterAll(async () => {
  await redis.remove();
});

// A client lags a Redis that came back by the wait before its next try: ioredis's default grows
// to 2 s, and calls answered UNAVAILABLE all that time after the outage had ended.
test('a dropped connection tries again at most half a second apart, and is back once Redis is', async () => {
  const client = connectRedis(redis.url, { name: 'reconnect-test' });
  try {
    await client.ping();
    const delays: number[] = [];
    const enoughTries = new Promise<void>((resolve) => {
      client.on('reconnecting', (delay: number) => {
        delays.push(delay);
        // 10 tries reach the cap (50 ms more each); 2 more show it holds.
        if (delays.length === 12) resolve();
      });
    });
    await redis.kill();
    await enoughTries;
    expect(Math.max(...delays)).toBe(RECONNECT_MAX_MS);
    expect(delays.slice(-2)).toEqual([RECONNECT_MAX_MS, RECONNECT_MAX_MS]);

    const ready = new Promise<void>((resolve) => client.once('ready', () => resolve()));
    await redis.start();
    await ready;
    expect(await client.ping()).toBe('PONG');
  } finally {
    client.disconnect();
  }
});
