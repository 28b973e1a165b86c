import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import { buildApp, type AppDeps } from '../../src/http/app.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { freePort, OwnRedis } from '../helpers/own-redis.ts';

// `/health` is liveness (answers whatever Redis does), `/ready` readiness for traffic (Redis
// answers, every shard of the process's range has an owner, not stopping). Before, /health was
// both: ok with no shard owned yet, and no answer at all while Redis was up but silent.
let sb: Sandbox;
const apps: FastifyInstance[] = [];
const conns: Redis[] = [];
const services: ApprovalService[] = [];

beforeAll(() => {
  sb = sandbox();
});

afterAll(async () => {
  await Promise.all(apps.map((a) => a.close()));
  await Promise.all(services.map((s) => s.close()));
  for (const c of conns) c.disconnect();
  await sb.cleanup();
});

/** The HTTP app on `redis`, reporting on what `extra` passes. */
function app(redis: Redis, extra: Partial<AppDeps> = {}): FastifyInstance {
  conns.push(redis);
  const members = new MemberRegistry(redis, keysFor(sb.config.prefix));
  const approvals = new ApprovalService({ redis, prefix: sb.config.prefix, shardCount: sb.config.shardCount, members });
  services.push(approvals);
  const a = buildApp({ redis, shardCount: sb.config.shardCount, members, approvals, ...extra });
  apps.push(a);
  return a;
}

async function get(a: FastifyInstance, url: string) {
  const res = await a.inject({ method: 'GET', url });
  return { status: res.statusCode, body: res.json() as Record<string, unknown> };
}

async function answering(): Promise<Redis> {
  const redis = new Redis(REDIS_URL);
  await redis.ping();
  return redis;
}

describe('/ready', () => {
  it('answers 200 for an API-only process once Redis answers', async () => {
    const a = app(await answering());
    expect(await get(a, '/ready')).toEqual({ status: 200, body: { ready: true, shardCount: 4, ownedShards: [] } });
  });

  it('answers 503 draining once the process begins to stop', async () => {
    let draining = false;
    const a = app(await answering(), { readiness: { draining: () => draining } });
    expect((await get(a, '/ready')).status).toBe(200);
    draining = true;
    expect(await get(a, '/ready')).toEqual({ status: 503, body: { ready: false, reason: 'draining', message: expect.stringContaining('stopping') } });
  });

  it('waits for every shard of the range to have an owner: before the first lease round, then with another process owning some', async () => {
    const first = await sb.pool([0, 1]);
    // A process that owns shards 0 and 1 of a 0-1 range is ready.
    const a = app(await answering(), { ownedShards: () => first.ownedShards(), readiness: { shardsWithoutOwner: () => first.shardsWithoutOwner() } });
    expect(await get(a, '/ready')).toMatchObject({ status: 200, body: { ready: true, ownedShards: [0, 1] } });

    // Another process of range 0-3, not started yet: nothing of its range counts as owned.
    const { ShardWorkerPool } = await import('../../src/shards/shard-worker-pool.ts');
    const { pino } = await import('pino');
    const { builtExecutorChild } = await import('../helpers/built-child.ts');
    const second = new ShardWorkerPool({ config: sb.config, shards: [0, 1, 2, 3], logger: pino({ level: 'silent' }), executorChild: builtExecutorChild });
    const b = app(await answering(), { ownedShards: () => second.ownedShards(), readiness: { shardsWithoutOwner: () => second.shardsWithoutOwner() } });
    expect(await get(b, '/ready')).toEqual({
      status: 503,
      body: { ready: false, reason: 'shards', message: expect.stringContaining('0, 1, 2, 3'), shardsWithoutOwner: [0, 1, 2, 3] },
    });
    // Started, it takes 2 and 3; 0 and 1 stay the first's, whose leases say so.
    await second.start();
    try {
      expect(await get(b, '/ready')).toMatchObject({ status: 200, body: { ready: true, ownedShards: [2, 3] } });
      // The first lets its shards go; the second takes them and stays ready.
      await first.stop();
      await expect.poll(async () => (await get(b, '/ready')).body.ownedShards, { timeout: 10_000 }).toEqual([0, 1, 2, 3]);
    } finally {
      await second.stop();
    }
  });
});

describe('with Redis down or silent', () => {
  let own: OwnRedis;
  beforeAll(async () => {
    own = await OwnRedis.start();
  });
  afterAll(async () => {
    own.signal('SIGCONT');
    await own.remove();
  });

  it('answers /health 200 and /ready 503 redis when nothing listens where Redis should be', async () => {
    const a = app(connectRedis(`redis://127.0.0.1:${await freePort()}`));
    expect(await get(a, '/health')).toEqual({ status: 200, body: { ok: true, redis: 'down', shardCount: 4, ownedShards: [] } });
    expect(await get(a, '/ready')).toEqual({ status: 503, body: { ready: false, reason: 'redis', message: expect.stringContaining('Redis did not answer') } });
  });

  it('answers both while Redis is up but answers nothing (stopped with SIGSTOP)', async () => {
    const redis = connectRedis(own.url);
    await redis.ping();
    const a = app(redis);
    expect(await get(a, '/health')).toMatchObject({ status: 200, body: { redis: 'up' } });
    own.signal('SIGSTOP');
    try {
      // The connection stays open and ready: a PING without a bound never answered.
      expect(await get(a, '/health')).toMatchObject({ status: 200, body: { ok: true, redis: 'down' } });
      expect(await get(a, '/ready')).toMatchObject({ status: 503, body: { reason: 'redis' } });
    } finally {
      own.signal('SIGCONT');
    }
    await expect.poll(async () => (await get(a, '/ready')).status).toBe(200);
  });
});
