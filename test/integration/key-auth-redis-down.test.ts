// A bearer key looked up while Redis is down answers UNAVAILABLE in words within a few seconds
// (faults.md: /v1 and /mcp never fail with a driver error). Before, the lookup waited out
// ioredis's 20 retries per command: 10 s then "Reached the max retries per request limit" over
// /v1, 500 "Internal error." after 12 s over /mcp, or no answer within 20 s (fault review 19).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AgentDbError } from '../../src/errors.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { KeyAuthenticator } from '../../src/registry/principal.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

let own: OwnRedis;
beforeAll(async () => {
  own = await OwnRedis.start();
});
afterAll(async () => {
  await own?.stop().catch(() => undefined);
});

it('a key looked up with Redis down answers UNAVAILABLE naming Redis within a few seconds', async () => {
  const redis = connectRedis(own.url, { name: 'key-auth-test' });
  redis.on('error', () => undefined);
  try {
    const auth = new KeyAuthenticator(redis, keysFor('kad'));
    // Member keys alone (/v1/approvals, /v1/databases, the web page's sessions) too.
    const members = new MemberRegistry(redis, keysFor('kad'));
    expect(await auth.authenticate(`adb_${'a'.repeat(43)}`)).toBeUndefined();
    expect(await members.authenticate(`adb_${'a'.repeat(43)}`)).toBeUndefined();
    await own.kill();
    for (const lookup of [() => auth.authenticate(`adb_${'b'.repeat(43)}`), () => members.authenticate(`adb_${'c'.repeat(43)}`)]) {
      const started = Date.now();
      const err = await lookup().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(Date.now() - started).toBeLessThan(5000);
      expect(err).toBeInstanceOf(AgentDbError);
      expect((err as AgentDbError).code).toBe('UNAVAILABLE');
      expect((err as AgentDbError).detail).toMatch(/Redis at redis:\/\/127\.0\.0\.1:\d+ does not answer/);
    }
  } finally {
    redis.disconnect();
  }
}, 30_000);
