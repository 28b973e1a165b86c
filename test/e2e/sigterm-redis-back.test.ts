import type { ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { freePort, OwnRedis } from '../helpers/own-redis.ts';
import { startCli, stop } from '../helpers/processes.ts';

// SIGTERM during a Redis outage that ends within the drain grace: a tester's `agentdb start`
// always exited 1 after the grace, even with Redis back 80 ms after the signal, its leases left
// to lapse. BullMQ's Worker.close waits for its blocking connection to end, and a connection
// that is reconnecting has no socket to end (taskforcesh/bullmq#4656): it waited for good.
let own: OwnRedis;
let sb: Sandbox;
let port: number;
const running: ChildProcess[] = [];

beforeAll(async () => {
  own = await OwnRedis.start();
  port = await freePort();
  // Leases far longer than the test: gone afterwards only if they were given back.
  // The deployment's job lock: a call in hand outlives the outage with its lock.
  sb = sandbox({
    REDIS_URL: own.url,
    PORT: String(port),
    LEASE_TTL_MS: '120000',
    LOCK_DURATION_MS: '30000',
    STALLED_INTERVAL_MS: '30000',
    DRAIN_GRACE_MS: '20000',
    EXECUTOR_POOL_SIZE: '1',
    LOG_LEVEL: 'info',
  });
});

afterAll(async () => {
  await Promise.all(running.map((p) => stop(p, 'SIGKILL')));
  await sb.cleanup();
  await own.remove();
});

/** Readiness: 503 once the service has seen Redis go (`/health` is liveness, 200 whatever Redis does). */
async function ready(): Promise<number> {
  return (await fetch(`http://127.0.0.1:${port}/ready`)).status;
}

const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };

/** `agentdb start`, SIGTERMed while Redis is down, Redis started again right after; `during` runs first. */
async function stopDuringOutage(during: () => Promise<void> = async () => undefined): Promise<{ code: number | null; log: string }> {
  const service = await startCli(['start'], sb.env);
  running.push(service);
  let log = service.readyLog;
  service.stderr!.on('data', (d) => (log += d));
  const exited = new Promise<number | null>((resolve) => service.once('exit', (code) => resolve(code)));
  await during();
  await own.kill();
  // The service has seen Redis go: its connections are reconnecting, with no socket.
  await expect.poll(ready, { interval: 100, timeout: 10_000 }).toBe(503);
  service.kill('SIGTERM');
  await own.start();
  return { code: await exited, log };
}

async function expectLeasesGiven(): Promise<void> {
  const redis = new Redis(own.url);
  try {
    const keys = keysFor(sb.config.prefix);
    for (let shard = 0; shard < sb.config.shardCount; shard++) expect(await redis.get(keys.lease(shard)), `shard ${shard}`).toBeNull();
  } finally {
    redis.disconnect();
  }
}

describe('SIGTERM while Redis is down', () => {
  it('finishes the drain once Redis is back within the grace: leases given back, exit 0', async () => {
    const { code, log } = await stopDuringOutage();
    expect(code, log.slice(-3000)).toBe(0);
    expect(log).not.toMatch(/did not finish within the drain grace/);
    await expectLeasesGiven();
  }, 60_000);

  it('with a call in hand: the call finishes and is answered, then the leases go back, exit 0', async () => {
    const client = sb.client();
    const slow = {
      ...who,
      callId: 'slow-1',
      tool: 'DATA_WRITE_SQL',
      arguments: {
        sql: 'INSERT INTO t (v) SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) SELECT x FROM c)',
      },
    };
    const { code, log } = await stopDuringOutage(async () => {
      expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v INTEGER)' } })).toMatchObject({ ok: true });
      void client.call(slow, { wait: false });
      await expect
        .poll(async () => (await client.result('slow-1', { workspace: 'acme', agent: 'scout' })).status, { interval: 20, timeout: 10_000 })
        .toBe('running');
    });
    expect(code, log.slice(-3000)).toBe(0);
    await expectLeasesGiven();
    // Its outcome was completed in Redis during the drain: no worker runs now.
    expect(await client.result('slow-1', { workspace: 'acme', agent: 'scout' })).toMatchObject({ ok: true, result: { changes: 1 } });
  }, 60_000);
});
