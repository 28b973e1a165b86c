import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { freePort, OwnRedis } from '../helpers/own-redis.ts';
import { startCli, stop } from '../helpers/processes.ts';

// issue 27 part 6: with Redis down, `agentdb start` logged ~29 lines a second ('shard worker
// error' per shard per reconnect) plus multi-line ECONNREFUSED dumps that were not JSON, and
// /health took 7.6 s to answer. Now: one JSON line when Redis goes, one when it is back; /health
// answers (liveness), /ready says why it is not ready.
let own: OwnRedis;
let sb: Sandbox;
let port: number;
let service: ChildProcess & { readyLog: string };
let log = '';

beforeAll(async () => {
  own = await OwnRedis.start();
  port = await freePort();
  sb = sandbox({ REDIS_URL: own.url, PORT: String(port), SHARD_COUNT: '4', EXECUTOR_POOL_SIZE: '2', DRAIN_GRACE_MS: '2000' });
  service = await startCli(['start'], sb.env);
  log = service.readyLog;
  service.stderr!.on('data', (d: Buffer) => (log += d));
});

afterAll(async () => {
  await stop(service, 'SIGKILL');
  await sb.cleanup();
  await own.remove();
});

async function get(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Resolves once the log has a line matching `pattern` after `from` characters. */
async function logged(pattern: RegExp, from: number): Promise<void> {
  await expect.poll(() => pattern.test(log.slice(from)), { interval: 50, timeout: 15_000 }).toBe(true);
}

function lines(text: string): string[] {
  return text.split('\n').filter((l) => l.length > 0);
}

describe('agentdb start with Redis down', () => {
  it('is ready with its shards owned, then logs the outage once as JSON, answers /health and says why it is not ready', async () => {
    expect(await get('/ready')).toMatchObject({ status: 200, body: { ready: true, ownedShards: [0, 1, 2, 3] } });
    const before = log.length;
    await own.kill();
    await logged(/"msg":"Redis does not answer/, before);
    expect(await get('/health')).toMatchObject({ status: 200, body: { ok: true, redis: 'down' } });
    expect(await get('/ready')).toMatchObject({ status: 503, body: { ready: false, reason: 'redis' } });
    // A window of outage to count what is logged in it: ioredis retries every few hundred ms,
    // and each retry of each shard's worker used to log (about 29 lines a second).
    await new Promise((r) => setTimeout(r, 3000));
    const outage = lines(log.slice(before));
    for (const line of outage) expect(() => JSON.parse(line), line).not.toThrow();
    expect(outage.filter((l) => /"redis":"down"/.test(l))).toHaveLength(1);
    expect(outage.length, outage.join('\n')).toBeLessThanOrEqual(3);

    const back = log.length;
    await own.start();
    await logged(/"msg":"Redis answers again"/, back);
    await expect.poll(async () => (await get('/ready')).status, { timeout: 15_000 }).toBe(200);
    const all = lines(log.slice(before));
    for (const line of all) expect(() => JSON.parse(line), line).not.toThrow();
    expect(all.filter((l) => /"redis":"up"/.test(l))).toHaveLength(1);
    expect(all.filter((l) => /"redis":"down"/.test(l))).toHaveLength(1);
  });
});
