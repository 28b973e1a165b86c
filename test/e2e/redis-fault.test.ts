import type { ChildProcess } from 'node:child_process';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient, CallAnswer } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { freePort, OwnRedis } from '../helpers/own-redis.ts';
import { spawnCli, startCli, stop, type LiveCli } from '../helpers/processes.ts';

// Redis killed under a running `agentdb start` (its own redis-server, on a free port) while
// agents write. A tester found calls in flight rejecting with ioredis's MaxRetriesPerRequestError
// ~10.6 s later (and most of them then ran when Redis came back), the job schedulers gone after
// Redis came back empty, and a SIGTERM during the outage never finishing.
const LANES = 6;
let own: OwnRedis;
let sb: Sandbox;
let port: number;
let service: ChildProcess | undefined;
let client: AgentDbClient;
const running: ChildProcess[] = [];

beforeAll(async () => {
  own = await OwnRedis.start();
  port = await freePort();
  // The deployment's own job lock (30 s) for the outages.
  sb = sandbox({
    REDIS_URL: own.url,
    PORT: String(port),
    SHARD_COUNT: '4',
    LOCK_DURATION_MS: '30000',
    STALLED_INTERVAL_MS: '1000',
    LEASE_TTL_MS: '3000',
    DRAIN_GRACE_MS: '1000',
    EXECUTOR_POOL_SIZE: '2',
  });
  service = await startService();
  client = sb.client();
  await Promise.all(lanes().map((agent) => client.call({ ...who(agent), tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v INTEGER)' } })));
});

afterAll(async () => {
  await Promise.all(running.map((p) => stop(p, 'SIGKILL')));
  await sb.cleanup();
  await own.remove();
});

function lanes(): string[] {
  return Array.from({ length: LANES }, (_, i) => `lane${i}`);
}

function who(agent: string) {
  return { workspace: 'acme', agent, settings: { database: 'agent' as const } };
}

async function startService(env: Record<string, string> = {}): Promise<ChildProcess> {
  const p = await startCli(['start'], { ...sb.env, ...env });
  running.push(p);
  return p;
}

function write(agent: string, v: number) {
  return { ...who(agent), callId: `${agent}-w${v}`, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t (v) VALUES (?)', params: [v] } };
}

/** Readiness: 503 while Redis is down (/health is liveness, 200 throughout). */
async function health(): Promise<number> {
  return (await fetch(`http://127.0.0.1:${port}/ready`)).status;
}

/** What every lane wrote, as acknowledged, and the calls left in doubt by the outage. */
interface Traffic {
  acked: Map<string, Set<number>>;
  inDoubt: { agent: string; v: number; answer: CallAnswer }[];
  escaped: unknown[];
}

/**
 * Each lane writes one row after another until a write answers UNAVAILABLE; `kill` runs once
 * the lanes have `before` acknowledged writes between them, with calls in flight. Resolves once
 * every lane has its answer, while Redis is still down.
 */
async function trafficUntilOutage(from: number, before: number, kill: () => Promise<void>): Promise<Traffic> {
  const t: Traffic = { acked: new Map(), inDoubt: [], escaped: [] };
  let total = 0;
  let killing: Promise<void> | undefined;
  await Promise.all(
    lanes().map(async (agent) => {
      const acked = new Set<number>();
      t.acked.set(agent, acked);
      for (let v = from; ; v++) {
        let answer: CallAnswer;
        try {
          answer = await client.call(write(agent, v));
        } catch (err) {
          t.escaped.push(err);
          return;
        }
        if (answer.ok) {
          acked.add(v);
          if (++total >= before) killing ??= kill();
          continue;
        }
        t.inDoubt.push({ agent, v, answer });
        return;
      }
    }),
  );
  await killing;
  return t;
}

/**
 * Whether this process's client reaches Redis again. The server's readiness says only that the
 * server's connections are back: each connection retries on its own timer (ioredis waits up to
 * 2 s between attempts), and until this one's next attempt its calls answer UNAVAILABLE at once.
 */
async function clientBack(): Promise<boolean> {
  const env = await client.call({ ...who('lane1'), tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } });
  return env.ok || env.error.code !== 'UNAVAILABLE';
}

/** Sends each call left in doubt again under its id, then reads every lane's rows back. */
async function settle(t: Traffic): Promise<void> {
  await expect.poll(clientBack, { timeout: 15_000 }).toBe(true);
  const resent = await Promise.all(t.inDoubt.map(({ agent, v }) => client.call(write(agent, v))));
  for (const env of resent) expect(env, JSON.stringify(env)).toMatchObject({ ok: true });
  const expected = new Map([...t.acked].map(([agent, vs]) => [agent, new Set(vs)]));
  for (const { agent, v } of t.inDoubt) expected.get(agent)!.add(v);
  for (const agent of lanes()) {
    const read = await client.call({
      ...who(agent),
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT v FROM t WHERE v >= ? AND v < 5000 ORDER BY v', params: [Math.min(...expected.get(agent)!)], max_rows: 1000 },
    });
    // Every acknowledged write once, and each in-doubt one once after its re-send: none lost, none doubled.
    expect(read.ok && (read.result.rows as number[][]).map((r) => r[0]), agent).toEqual([...expected.get(agent)!].sort((a, b) => a - b));
  }
}

function expectAnsweredInWords(t: Traffic): void {
  expect(t.escaped).toEqual([]);
  expect(t.inDoubt).toHaveLength(LANES);
  for (const { answer } of t.inDoubt) {
    expect(answer).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE', message: expect.stringContaining(`Redis at ${own.url}`) } });
    expect(typeof (answer as { mayStillRun?: unknown }).mayStillRun).toBe('boolean');
  }
}

/** How many calls running `sql` a worker has in hand. */
async function runningCalls(sql: string): Promise<number> {
  let n = 0;
  for (let shard = 0; shard < sb.config.shardCount; shard++) {
    const q = new Queue(`{shard-${shard}}`, { connection: { url: own.url }, prefix: sb.config.prefix });
    try {
      n += (await q.getActive()).filter((j) => j.data.arguments?.sql === sql).length;
    } finally {
      await q.close();
    }
  }
  return n;
}

async function schedulers(): Promise<string[]> {
  const q = new Queue('{maintenance}', { connection: { url: own.url }, prefix: sb.config.prefix });
  try {
    return (await q.getJobSchedulers()).map((s) => s.key).sort();
  } finally {
    await q.close();
  }
}

describe('Redis killed under a running agentdb', () => {
  it('answers the calls in flight UNAVAILABLE, and after Redis comes back empty loses and doubles nothing and has its schedulers again', async () => {
    const all = ['as-of-sweep', 'backup', 'history-prune', 'history-snapshot', 'prune', 'results-trim'];
    expect(await schedulers()).toEqual(all);
    const t = await trafficUntilOutage(1, 30, () => own.kill());
    // Every lane's answer arrived while Redis was down.
    expectAnsweredInWords(t);
    expect(await health()).toBe(503);

    own.wipe();
    await own.start();
    await expect.poll(health, { timeout: 15_000 }).toBe(200);
    await expect.poll(schedulers, { timeout: 15_000 }).toEqual(all);
    await settle(t);
  });

  it('with AOF: the calls in flight run once, whether they were re-sent or not; the CLI answers in words too', async () => {
    // `agentdb call` with a write that takes a while, in hand when Redis dies.
    const slowSql =
      'INSERT INTO t (v) SELECT 7000 FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT count(*) FROM c)';
    const cli = spawnCli(
      ['call', '--workspace', 'acme', '--agent', 'lane1', '--settings', '{"database":"agent"}', 'DATA_WRITE_SQL', JSON.stringify({ sql: slowSql })],
      sb.env,
    );
    running.push(cli.child);
    const t = await trafficUntilOutage(1000, 30, async () => {
      await expect.poll(() => runningCalls(slowSql), { interval: 20, timeout: 15_000 }).toBeGreaterThan(0);
      await own.kill();
    });
    expectAnsweredInWords(t);
    const done = await cli.exited;
    const env = JSON.parse(done.stdout);
    // UNAVAILABLE: try again later (it may still run: its callId says where its outcome will be).
    expect(done.code).toBe(3);
    expect(env).toMatchObject({ ok: false, mayStillRun: true, error: { code: 'UNAVAILABLE', message: expect.stringContaining(`Redis at ${own.url}`) } });
    expect(done.stderr).not.toMatch(/\n\s+at /);
    await own.start();
    await expect.poll(health, { timeout: 15_000 }).toBe(200);
    await settle(t);
    // The CLI's write was in Redis's AOF: it runs, once, without being sent again.
    expect(await client.result(env.callId, { workspace: 'acme', agent: 'lane1', wait: true })).toMatchObject({ ok: true, result: { changes: 1 } });
    const read = await client.call({ ...who('lane1'), tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t WHERE v = 7000' } });
    expect(read).toMatchObject({ ok: true, result: { rows: [[1]] } });
  });

  it('answers calls whose worker was killed once the service is back, without waiting for their job lock', async () => {
    // A job lock far past the test's bound: the call is answered only because the new owner
    // takes the killed one's jobs back, never because the lock lapsed.
    const longLock = { LOCK_DURATION_MS: '300000', STALLED_INTERVAL_MS: '300000' };
    await stop(service!, 'SIGTERM');
    service = await startService(longLock);
    // A write that takes a while, so it is in hand when the service dies.
    const slow = {
      ...who('lane0'),
      callId: 'slow-1',
      tool: 'DATA_WRITE_SQL',
      arguments: {
        sql: 'INSERT INTO t (v) SELECT 5000 FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT count(*) FROM c)',
      },
    };
    const answer = client.call(slow);
    const cli: LiveCli = spawnCli(
      [
        'call',
        '--workspace',
        'acme',
        '--agent',
        'lane0',
        '--settings',
        '{"database":"agent"}',
        'DATA_QUERY_SQL',
        '{"sql":"SELECT count(*) FROM t WHERE v = 5000"}',
      ],
      sb.env,
    );
    running.push(cli.child);
    await expect
      .poll(async () => (await client.result('slow-1', { workspace: 'acme', agent: 'lane0' })).status, { interval: 20, timeout: 10_000 })
      .toBe('running');
    await stop(service!, 'SIGKILL');
    service = await startService(longLock);
    expect(await answer).toMatchObject({ ok: true, result: { changes: 1 } });
    expect((await cli.exited).code).toBe(0);
    const read = await client.call({ ...who('lane0'), tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t WHERE v = 5000' } });
    expect(read).toMatchObject({ ok: true, result: { rows: [[1]] } });
  });

  it('stops on SIGTERM during an outage, after its drain grace, instead of waiting for Redis', async () => {
    const exited = new Promise<number | null>((resolve) => service!.once('exit', (code) => resolve(code)));
    await own.kill();
    service!.kill('SIGTERM');
    // Redis stays down: the process ends on its own.
    expect(await exited).toBe(1);
    // And a client closes without Redis (a pending event read used to hold it for good).
    await client.close();
  });
});
