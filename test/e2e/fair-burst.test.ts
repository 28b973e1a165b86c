import type { ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import type { Envelope } from '../../src/contracts/envelope.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { readExecutors } from '../../src/shards/executor-status-publisher.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startCli, stop } from '../helpers/processes.ts';

const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c';
const settings = { database: 'agent' as const };
/**
 * The burst was 20; 10 tells the same apart in half the wait (each two runaways hold the
 * pool for a deadline): oldest-first still answers the read after the 8 waiting ahead of it.
 */
const BURST = 10;
const WARMED = 8;

let sb: Sandbox | undefined;
const workers: ChildProcess[] = [];
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => stop(w, 'SIGKILL')));
  await sb?.cleanup();
  sb = undefined;
});

/** The databases the worker's executor children run now, as it last published them. */
async function running(): Promise<string[]> {
  const redis = connectRedis(sb!.config.redisUrl);
  try {
    const workers = await readExecutors(redis, keysFor(sb!.config.prefix));
    return workers.flatMap((w) => w.pool.children.flatMap((c) => (c.database ? [c.database] : [])));
  } finally {
    redis.disconnect();
  }
}

/**
 * Starts a worker with the pool of 2 (and its overflow lane of 1) and a deadline long
 * enough for a read to go through Redis on a loaded machine; a quiet workspace makes its table
 * and reads it once, so its read is on record as quick.
 */
async function quietSite() {
  sb = sandbox({ SHARD_COUNT: '1', EXECUTOR_POOL_SIZE: '2', STATEMENT_TIMEOUT_MS: '3000' });
  workers.push(await startCli(['worker'], sb.env));
  const client = sb.client();
  const quiet = { workspace: 'quiet', agent: 'a', settings };
  expect(await client.call({ ...quiet, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v)' } })).toMatchObject({ ok: true });
  expect(await client.call({ ...quiet, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } })).toMatchObject({ ok: true });
  const order: string[] = [];
  const track = (name: string, p: Promise<Envelope>) => p.then((e) => (order.push(name), e));
  /** Each of `workspaces` starts one runaway; once both pooled children run one, the quiet workspace reads. */
  const burstThenRead = async (workspaces: string[]) => {
    const burst = workspaces.map((ws) => track(ws, client.call({ workspace: ws, agent: 'a', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: FOREVER } })));
    const prefix = workspaces[0]!.replace(/\d+$/, '');
    await expect.poll(async () => (await running()).filter((db) => db.startsWith(prefix)).length, { interval: 50, timeout: 30_000 }).toBe(2);
    const before = order.length;
    const read = await track('read', client.call({ ...quiet, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } }));
    expect(read).toMatchObject({ ok: true, result: { rows: [[0]] } });
    // Answered beside the runaways, on the overflow lane's child: none of them had ended.
    expect(order.slice(before)).toEqual(['read']);
    const ends = await Promise.all(burst);
    expect(ends.every((e) => !e.ok && e.error.code === 'STATEMENT_TIMEOUT')).toBe(true);
  };
  return { client, burstThenRead };
}

describe('a burst of fresh workspaces (issue 27)', () => {
  it("answers a quiet workspace's read before any of the burst's runaways ends", async () => {
    // The setting, shortened: a pool of 2 and a short deadline. Workspaces the executor
    // has never seen (the 20, BURST here) each start one runaway; a workspace that has
    // read before reads. Oldest-first, or least-recent-time-first (fresh workspaces have none),
    // answered the read after all the runaways waiting ahead of it (18 in the issue: 100 s with
    // a 10 s deadline); turns with cheap workspaces first, after the two runaways holding the
    // children when it came.
    const { burstThenRead } = await quietSite();
    await burstThenRead(Array.from({ length: BURST }, (_, i) => `fresh${i}`));
  }, 180_000);
});

describe('a burst of warmed-up workspaces (issue 27)', () => {
  it("answers a quiet workspace's read before any of their runaways ends, though each looked as cheap as the quiet one", async () => {
    // Each first runs cheap statements, as the quiet workspace did, then starts one runaway: in
    // turns with cheap workspaces first, the quiet read took its turn among them, and was
    // answered after all eight (EXECUTOR_OVERFLOW=0 does so still).
    const { client, burstThenRead } = await quietSite();
    const warmed = Array.from({ length: WARMED }, (_, i) => `warm${i}`);
    for (const ws of warmed) {
      const at = { workspace: ws, agent: 'a', settings };
      expect(await client.call({ ...at, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v)' } })).toMatchObject({ ok: true });
      for (let i = 0; i < 2; i++)
        expect(await client.call({ ...at, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } })).toMatchObject({ ok: true });
    }
    await burstThenRead(warmed);
  }, 180_000);
});
