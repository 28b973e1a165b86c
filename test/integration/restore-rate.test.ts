import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { pastMs } from '../helpers/history.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { signedInCookie, startWebServer } from '../helpers/web-server.ts';

// Restores were charged no rate (only a dry run was, as a page of activity): one admin restoring
// in place back to back, 7.5 a second on one shard, doubled another workspace's PK reads there
// (session 33, T11). A restore now counts 50 calls before it runs (and a call per MiB it wrote),
// on the API and on every form of the web page, and is refused past the rate with nothing
// restored. Its op waits in its workspace's turn on a long shard queue, as a call does.
const settings = { database: 'agent' as const };
let sb: Sandbox;
let redis: Redis;
let ops: ShardOpClient;
let history: HistoryClient;
let client: AgentDbClient;

const write = (workspace: string, sql: string) => client.call({ workspace, agent: 'scout', settings, tool: 'DATA_WRITE_SQL', arguments: { sql } });
const restores = async (db: string) => (await history.activity(db, {}, 'operator')).entries.filter((e) => e.kind === 'restore').length;

beforeAll(async () => {
  sb = sandbox({ SHARD_COUNT: '1', WORKER_CONCURRENCY: '4' });
  redis = new Redis(REDIS_URL);
  ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
  history = new HistoryClient(ops, 1, new AgentRegistry(redis, keysFor(sb.config.prefix)));
  client = sb.client();
}, 60_000);

afterAll(async () => {
  await ops?.close();
  redis?.disconnect();
  await sb?.cleanup();
}, 60_000);

/**
 * Writes `statements` to `workspace`'s database, then a row more after the moment it returns (the
 * moment a restore goes back to), with a worker of its own.
 */
async function seed(workspace: string, statements = ['CREATE TABLE t (a)', 'INSERT INTO t VALUES (1)', 'INSERT INTO t VALUES (2)']): Promise<number> {
  const pool = await sb.pool();
  try {
    for (const sql of statements) expect(await write(workspace, sql)).toMatchObject({ ok: true });
    const moment = Date.now();
    pastMs(moment);
    expect(await write(workspace, 'INSERT INTO t VALUES (3)')).toMatchObject({ ok: true });
    return moment;
  } finally {
    await pool.stop();
  }
}

/** A restore of `workspace`'s database to `at` over `/v1`, with the member key `key`. */
const restoreOverV1 = (app: KeyedApp, key: string, workspace: string, at: number) =>
  app.app.inject({
    method: 'POST',
    url: `/v1/databases/${workspace}%2Fscout/restore`,
    headers: { authorization: `Bearer ${key}` },
    payload: { at: at / 1000 },
  });

it("charges a restore over /v1 50 calls before it runs, and refuses it past the workspace's rate with nothing restored", async () => {
  const moment = await seed('rv1');
  const pool = await sb.pool();
  // 120 calls a window: two restores (50 each) pass, the third is refused.
  const k = keyedApp(sb, { rateLimits: { windowS: 600, workspaceCalls: 120 }, history });
  try {
    const key = await k.memberKey('rv1', 'ada', 'admin');
    const restore = () => restoreOverV1(k, key, 'rv1', moment);
    expect((await restore()).statusCode).toBe(200);
    expect((await restore()).statusCode).toBe(200);
    const third = await restore();
    expect(third.statusCode).toBe(429);
    expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
    expect(third.json()).toMatchObject({
      error: { code: 'RATE_LIMITED', retryAfter: expect.any(Number), message: expect.stringContaining('a restore counts 50') },
    });
    expect(await restores('rv1/scout')).toBe(2);
  } finally {
    await k.close();
    await pool.stop();
  }
}, 120_000);

it("charges the activity list's restore form on the web page, which went uncharged", async () => {
  await seed('rweb');
  const pool = await sb.pool();
  // 60 calls a window: the pages a tenth each, one restore (50); the second is refused.
  const web = await startWebServer(sb, { rateLimits: { windowS: 600, workspaceCalls: 60 } });
  try {
    const cookie = await signedInCookie(web, 'rweb', 'ada', 'admin');
    const restoreForm = async () => {
      const r = await fetch(`${web.url}/data/history?db=${encodeURIComponent('rweb/scout')}`, { headers: { cookie, accept: 'text/html' } });
      expect(r.status).toBe(200);
      const [, body] = (await r.text()).match(/<form method="post" action="\/data\/history\/activity-restore"[^>]*>([\s\S]*?)<\/form>/)!;
      const fields = new URLSearchParams([...body!.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map(([, n, v]) => [n!, v!]));
      fields.set('confirm', 'rweb/scout');
      return fetch(`${web.url}/data/history/activity-restore`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, origin: web.url, 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
        body: fields.toString(),
      });
    };
    expect((await restoreForm()).status).toBe(303);
    const second = await restoreForm();
    expect(second.status).toBe(429);
    expect(await second.text()).toContain('RATE_LIMITED');
    expect(await restores('rweb/scout')).toBe(1);
  } finally {
    await web.close();
    await pool.stop();
  }
}, 120_000);

it("places shard ops in their workspace's turn: one workspace's burst of ops no longer holds another's call behind all of it", async () => {
  await seed('oploud');
  await seed('opquiet');
  const keys = keysFor(sb.config.prefix);
  const queue = `${keys.bullPrefix}:${keys.queueName(0)}`;
  const queued = async () => (await redis.llen(`${queue}:wait`)) + (await redis.zcard(`${queue}:prioritized`));
  const BURST = 300;
  const done: string[] = [];
  const before = await queued();
  // A page of activity each: what a member's dry runs, history pages and grid pages all are, ops on the shard's queue.
  const burst = Array.from({ length: BURST }, () =>
    history.activity('oploud/scout', { limit: 1 }, 'operator').then((page) => {
      done.push('op');
      return page;
    }),
  );
  await expect.poll(queued, { interval: 20, timeout: 30_000 }).toBe(before + BURST);
  const quiet = client
    .call({ workspace: 'opquiet', agent: 'scout', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } }, { timeoutMs: 120_000 })
    .then((a) => {
      done.push('quiet');
      return a;
    });
  await expect.poll(queued, { interval: 20, timeout: 30_000 }).toBe(before + BURST + 1);
  const pool = await sb.pool();
  try {
    const [answer, ...pages] = await Promise.all([quiet, ...burst]);
    expect(answer).toMatchObject({ ok: true });
    expect(pages.every((p) => p.entries.length === 1)).toBe(true);
    // On the wait list, first come first taken, the ops went first: the call finished last.
    expect(done.indexOf('quiet')).toBeLessThan(BURST / 2);
  } finally {
    await pool.stop();
  }
}, 120_000);

/** A database of `workspace` whose moment returned is 20 MiB, then a row more. */
const seedBig = (workspace: string) =>
  seed(workspace, [
    'CREATE TABLE t (a)',
    'WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20) INSERT INTO t SELECT zeroblob(1048576) FROM n',
  ]);

it('charges the MiB a restore writes before it runs, from its plan: one that does not fit the window is refused with nothing restored', async () => {
  // A moment of 20 MiB: 50 calls and 20 more. Charged after the run (T12), the restore ran at
  // 50 of 60 calls and spent its 20 MiB into the next window.
  const moment = await seedBig('rbig');
  const roomyMoment = await seedBig('rroomy');
  const worker = await sb.pool();
  const k = keyedApp(sb, { rateLimits: { windowS: 600, workspaceCalls: 60 }, history });
  const roomy = keyedApp(sb, { rateLimits: { windowS: 600, workspaceCalls: 75 }, history });
  try {
    // The window's first request: its 50 calls fit, only the MiB its plan knows of can refuse it.
    const refused = await restoreOverV1(k, await k.memberKey('rbig', 'ada', 'admin'), 'rbig', moment);
    expect(refused.statusCode).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.json()).toMatchObject({ error: { code: 'RATE_LIMITED', retryAfter: expect.any(Number), message: expect.stringContaining('per MiB') } });
    expect(await restores('rbig/scout')).toBe(0);
    // With room for both (70 calls of 75), it runs.
    const ran = await restoreOverV1(roomy, await roomy.memberKey('rroomy', 'ada', 'admin'), 'rroomy', roomyMoment);
    expect(ran.statusCode).toBe(200);
    expect(ran.json().restoredBytes).toBeGreaterThan(20 * 1024 * 1024);
    expect(await restores('rroomy/scout')).toBe(1);
  } finally {
    await k.close();
    await roomy.close();
    await worker.stop();
  }
}, 120_000);
