import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { freePort, OwnRedis } from '../helpers/own-redis.ts';
import { runCli } from '../helpers/processes.ts';
import { startS3Server } from '../helpers/s3-server.ts';

// `agentdb doctor`: each check ok, warn or fail with what to change; exit 1 when one fails.
let sb: Sandbox;
let own: OwnRedis;
let admin: Redis;

beforeAll(async () => {
  sb = sandbox();
  own = await OwnRedis.start();
  admin = new Redis(own.url);
});

afterAll(async () => {
  admin.disconnect();
  await own.remove();
  await sb.cleanup();
});

interface Report {
  ok: boolean;
  checks: { check: string; status: 'ok' | 'warn' | 'fail'; detail: string; fix?: string }[];
}

async function doctor(env: Record<string, string> = {}): Promise<{ code: number | null; report: Report }> {
  const run = await runCli(['doctor', '--json'], { ...sb.env, ...env });
  expect(run.stderr).toBe('');
  return { code: run.code, report: JSON.parse(run.stdout) as Report };
}

function statusOf(report: Report): Record<string, string> {
  return Object.fromEntries(report.checks.map((c) => [c.check, c.status]));
}

const REDIS_CHECKS = ['redis-persistence', 'redis-maxmemory', 'redis-eviction-policy', 'redis-memory-headroom', 'clock'];

describe('agentdb doctor', () => {
  it('on a Redis with AOF and maxmemory with noeviction: every Redis, folder, disk and blob check ok, exit 0', async () => {
    await admin.config('SET', 'maxmemory', '256mb');
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    const { code, report } = await doctor({ REDIS_URL: own.url });
    const status = statusOf(report);
    for (const check of [...REDIS_CHECKS, 'data-folder', 'disk-free', 'blob-store']) expect(status[check], JSON.stringify(report.checks)).toBe('ok');
    // The Node check: ok on 22 and later, a warning on 20 (what this machine runs); never a failure.
    expect(status['node-version']).not.toBe('fail');
    expect(report.ok).toBe(true);
    expect(code).toBe(0);
    for (const c of report.checks) if (c.status === 'ok') expect(c.fix).toBeUndefined();
  });

  it('on the shared test Redis (no AOF, no maxmemory): says so with what to change, and exits 1 when a check fails', async () => {
    const { code, report } = await doctor();
    const persistence = report.checks.find((c) => c.check === 'redis-persistence')!;
    expect(persistence.status).not.toBe('ok');
    expect(persistence.fix).toMatch(/appendonly yes/);
    const maxmemory = report.checks.find((c) => c.check === 'redis-maxmemory')!;
    expect(maxmemory.status).toBe('warn');
    expect(maxmemory.fix).toMatch(/maxmemory/);
    expect(code).toBe(report.checks.some((c) => c.status === 'fail') ? 1 : 0);
    expect(report.ok).toBe(code === 0);
  });

  it("on a Redis started with flags alone, as agentdb start's own: the fix gives flags, not a CONFIG REWRITE that refuses", async () => {
    // Review N10: `npm start`'s redis-server has no config file, and the fix said "CONFIG SET
    // maxmemory 1gb, then CONFIG REWRITE", which answers "ERR The server is running without a config file".
    await expect(admin.config('REWRITE')).rejects.toThrow(/without a config file/);
    await admin.config('SET', 'maxmemory', '0');
    try {
      const { report } = await doctor({ REDIS_URL: own.url });
      const maxmemory = report.checks.find((c) => c.check === 'redis-maxmemory')!;
      expect(maxmemory.status).toBe('warn');
      expect(maxmemory.fix).toContain('--maxmemory 1gb --maxmemory-policy noeviction where Redis is started: this Redis has no config file');
      expect(maxmemory.fix).toContain('The redis-server `agentdb start` starts when none answers sets none');
      expect(maxmemory.fix).toContain('CONFIG REWRITE refuses');
      expect(maxmemory.fix).not.toMatch(/then CONFIG REWRITE/);
    } finally {
      await admin.config('SET', 'maxmemory', '256mb');
    }
  });

  it('a Redis without persistence: a durability failure that says so, and --dev makes it a warning (exit 0)', async () => {
    // Review N5 (session 29): a new user's dev Redis met a bare FAIL, not said to be about
    // durability nor to be expected on a development machine, and no way to pass the check there.
    await admin.config('SET', 'maxmemory', '256mb');
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'appendonly', 'no');
    await admin.config('SET', 'save', '');
    try {
      const strict = await doctor({ REDIS_URL: own.url });
      const failed = strict.report.checks.find((c) => c.check === 'redis-persistence')!;
      expect(failed.status).toBe('fail');
      expect(failed.detail).toMatch(
        /^Durability: AOF is off and so are RDB snapshots: a Redis restart loses .*every registered workspace, agent, member and key/,
      );
      expect(failed.detail).toMatch(/A failure for a deployment; on a development machine .* agentdb doctor --dev counts it as a warning\.$/);
      expect(failed.fix).toMatch(/appendonly yes/);
      expect(strict.code).toBe(1);
      const dev = await runCli(['doctor', '--json', '--dev'], { ...sb.env, REDIS_URL: own.url });
      const report = JSON.parse(dev.stdout) as Report;
      expect(report.checks.find((c) => c.check === 'redis-persistence')).toMatchObject({
        status: 'warn',
        detail: expect.stringMatching(/^Durability: .* A warning with --dev: expected of a development Redis; a failure for a deployment\.$/),
        fix: expect.stringMatching(/appendonly yes/),
      });
      expect(report.ok).toBe(true);
      expect(dev.code).toBe(0);
    } finally {
      await admin.config('SET', 'appendonly', 'yes');
    }
  });

  it('fails an evicting policy and a Redis nearly full, and prints a table by default', async () => {
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
    await admin.config('SET', 'maxmemory', String(Math.ceil(used / 0.95)));
    try {
      const { code, report } = await doctor({ REDIS_URL: own.url });
      expect(statusOf(report)).toMatchObject({ 'redis-eviction-policy': 'fail', 'redis-memory-headroom': 'fail' });
      expect(report.checks.find((c) => c.check === 'redis-eviction-policy')!.fix).toMatch(/noeviction/);
      expect(code).toBe(1);
      const table = await runCli(['doctor'], { ...sb.env, REDIS_URL: own.url });
      expect(table.code).toBe(1);
      expect(table.stdout).toMatch(/^FAIL {2}redis-eviction-policy +maxmemory-policy is allkeys-lru/m);
      expect(table.stdout).toMatch(/^ +fix: Set maxmemory-policy noeviction/m);
      expect(table.stdout).toMatch(/\d+ ok, \d+ warnings?, \d+ failures?\n$/);
    } finally {
      await admin.config('SET', 'maxmemory', '256mb');
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
    }
  });

  it('fails a data folder and a blob store it cannot write, and the Redis checks when Redis does not answer, running the rest', async () => {
    const file = path.join(sb.dataDir, 'not-a-folder');
    writeFileSync(file, 'x');
    const { code, report } = await doctor({ REDIS_URL: `redis://127.0.0.1:${await freePort()}`, AGENTDB_DATA_DIR: file, BLOB_DIR: path.join(file, 'blobs') });
    const status = statusOf(report);
    for (const check of REDIS_CHECKS) expect(status[check]).toBe('fail');
    expect(report.checks.find((c) => c.check === 'redis-persistence')!.detail).toMatch(/does not answer/);
    expect(status['data-folder']).toBe('fail');
    expect(status['blob-store']).toBe('fail');
    expect(report.checks.find((c) => c.check === 'blob-store')!.fix).toMatch(/BLOB_DIR/);
    // Checks that need neither still ran.
    expect(status['disk-free']).toBeDefined();
    expect(status['node-version']).toBeDefined();
    expect(code).toBe(1);
  });

  it('probes an S3 blob store: ok on a bucket it may write, fail with the S3 settings to check on one that is missing', async () => {
    const s3 = await startS3Server();
    try {
      // The AWS SDK warns on stderr under Node 20 (the doctor's node-version check says as much).
      const env = { REDIS_URL: own.url, ...s3.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' };
      const ok = await doctor(env);
      expect(ok.report.checks.find((c) => c.check === 'blob-store')).toMatchObject({ status: 'ok', detail: expect.stringContaining(`s3://${s3.bucket}`) });
      const missing = await doctor({ ...env, S3_BUCKET: 'no-such-bucket' });
      expect(missing.report.checks.find((c) => c.check === 'blob-store')).toMatchObject({ status: 'fail', fix: expect.stringContaining('S3_BUCKET') });
      expect(missing.code).toBe(1);
    } finally {
      await s3.stop();
    }
  });

  it('with START_WORKERS=off (HTTP only) warns while no worker owns a shard, and is ok once every lease is held', async () => {
    const { keysFor } = await import('../../src/redis/keys.ts');
    const keys = keysFor(sb.config.prefix);
    // A process that starts its own workers has nothing to check.
    expect(statusOf((await doctor({ REDIS_URL: own.url })).report)['shard-owners']).toBeUndefined();
    const alone = await doctor({ REDIS_URL: own.url, START_WORKERS: 'off' });
    expect(alone.report.checks.find((c) => c.check === 'shard-owners')).toMatchObject({
      status: 'warn',
      detail: expect.stringContaining('shards 0, 1, 2, 3 of 4'),
      fix: expect.stringContaining('agentdb worker'),
    });
    // Leases held, as a running worker holds them.
    for (let shard = 0; shard < 4; shard++) await admin.set(keys.lease(shard), `elsewhere:0:1:${shard}`, 'PX', 60_000);
    try {
      expect(statusOf((await doctor({ REDIS_URL: own.url, START_WORKERS: 'off' })).report)['shard-owners']).toBe('ok');
    } finally {
      for (let shard = 0; shard < 4; shard++) await admin.del(keys.lease(shard));
    }
  });
});
