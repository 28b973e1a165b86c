import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OwnRedis } from '../helpers/own-redis.ts';
import { runCli } from '../helpers/processes.ts';

// Session 29, F5: a Redis whose own disk was full answered `MISCONF …` to every write, PING
// included, and every operator command said "Redis at … does not answer (MISCONF …). Start it":
// it answers; it refuses writes, and starting it is not the fix. Here its RDB snapshot fails
// (its folder removed, `stop-writes-on-bgsave-error` on), which makes Redis answer the same MISCONF
// as a full disk under its AOF, without a mount.

let own: OwnRedis;
let admin: Redis;
const env: Record<string, string> = {};

beforeAll(async () => {
  own = await OwnRedis.start();
  admin = new Redis(own.url, { maxRetriesPerRequest: 0 });
  await admin.config('SET', 'save', '900 1');
  // Its folder removed under it (`dir` cannot be set at run time): the snapshot has nowhere to go.
  fs.rmSync(own.dir, { recursive: true });
  await admin.bgsave();
  // The snapshot's child fails at once: Redis refuses writes from then on.
  for (;;) {
    if ((await admin.info('persistence')).includes('rdb_last_bgsave_status:err')) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  await expect(admin.set('probe', '1')).rejects.toThrow(/^MISCONF/);
  Object.assign(env, {
    REDIS_URL: own.url,
    AGENTDB_PREFIX: 'refuses-writes',
    AGENTDB_DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-misconf-data-')),
    LOG_LEVEL: 'silent',
  });
});
afterAll(async () => {
  admin.disconnect();
  // SHUTDOWN would try the failing snapshot again and refuse to stop: killed.
  await own.kill();
  fs.rmSync(own.dir, { recursive: true, force: true });
  if (env.AGENTDB_DATA_DIR) fs.rmSync(env.AGENTDB_DATA_DIR, { recursive: true, force: true });
});

describe('a Redis that refuses writes (MISCONF: its own disk)', () => {
  it('is said so, with its code, by an operator command and by a worker starting, exit 3 (try again later)', { timeout: 60_000 }, async () => {
    for (const [command, args] of [
      ['backup now', ['backup', 'now']],
      ['history', ['history', 'acme/scout']],
      ['worker', ['worker']],
    ] as const) {
      const run = await runCli([...args], env);
      expect(run.code, command).toBe(3);
      expect(run.stderr).toMatch(
        new RegExp(
          `^agentdb ${command}: REDIS_REFUSES_WRITES: Redis at redis://127\\.0\\.0\\.1:\\d+ answers, but refuses writes: it could not write to its own disk \\(MISCONF `,
        ),
      );
      expect(run.stderr).toMatch(/Free space on the disk of Redis's folder/);
      expect(run.stderr).not.toMatch(/does not answer|Start it/);
    }
  });

  it("is what agentdb doctor's Redis checks say, with the fix that applies", { timeout: 30_000 }, async () => {
    const run = await runCli(['doctor'], env);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/FAIL {2}redis-persistence +Redis at \S+ answers, but refuses writes/);
    expect(run.stdout).toMatch(/fix: Free space on the disk of Redis's folder/);
    expect(run.stdout).not.toMatch(/Start Redis/);
  });
});
