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
  sb = sandbox({ REDIS_URL: own.url, PORT: String(port), LEASE_TTL_MS: '120000', DRAIN_GRACE_MS: '15000', EXECUTOR_POOL_SIZE: '1', LOG_LEVEL: 'info' });
});

afterAll(async () => {
  await Promise.all(running.map((p) => stop(p, 'SIGKILL')));
  await sb.cleanup();
  await own.remove();
});

async function health(): Promise<number> {
  return (await fetch(`http://127.0.0.1:${port}/health`)).status;
}

describe('SIGTERM while Redis is down', () => {
  it('finishes the drain once Redis is back within the grace: leases given back, exit 0', async () => {
    const service = await startCli(['start'], sb.env);
    running.push(service);
    let log = service.readyLog;
    service.stderr!.on('data', (d) => (log += d));
    const exited = new Promise<number | null>((resolve) => service.once('exit', (code) => resolve(code)));

    await own.kill();
    // The service has seen Redis go: its connections are reconnecting, with no socket.
    await expect.poll(health, { interval: 100, timeout: 10_000 }).toBe(503);
    service.kill('SIGTERM');
    await own.start();

    expect(await exited, log.slice(-3000)).toBe(0);
    expect(log).not.toMatch(/did not finish within the drain grace/);
    const redis = new Redis(own.url);
    try {
      const keys = keysFor(sb.config.prefix);
      for (let shard = 0; shard < sb.config.shardCount; shard++) expect(await redis.get(keys.lease(shard)), `shard ${shard}`).toBeNull();
    } finally {
      redis.disconnect();
    }
  }, 60_000);
});
