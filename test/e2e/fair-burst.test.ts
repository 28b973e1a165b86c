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
const BURST = 20;

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

describe('a burst of fresh workspaces (issue 27)', () => {
  it("answers a quiet workspace's read within the burst's first round, not after every fresh workspace's runaway", async () => {
    // The setting, shortened: a pool of 2 and a short deadline. Twenty workspaces the
    // executor has never seen each start one runaway; a workspace that has read before reads.
    // Oldest-first, or least-recent-time-first (fresh workspaces have none), answered the read
    // after the 18 runaways waiting ahead of it (100 s with a 10 s deadline).
    sb = sandbox({ SHARD_COUNT: '1', EXECUTOR_POOL_SIZE: '2', STATEMENT_TIMEOUT_MS: '1500' });
    workers.push(await startCli(['worker'], sb.env));
    const client = sb.client();
    const quiet = { workspace: 'quiet', agent: 'a', settings };
    expect(await client.call({ ...quiet, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v)' } })).toMatchObject({ ok: true });
    expect(await client.call({ ...quiet, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } })).toMatchObject({ ok: true });

    const order: string[] = [];
    const track = (name: string, p: Promise<Envelope>) => p.then((e) => (order.push(name), e));
    const burst = Array.from({ length: BURST }, (_, i) =>
      track(`fresh${i}`, client.call({ workspace: `fresh${i}`, agent: 'a', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: FOREVER } })),
    );
    // Both children run the burst's runaways: the rest of the burst waits for them.
    await expect.poll(async () => (await running()).filter((db) => db.startsWith('fresh')).length, { interval: 50, timeout: 30_000 }).toBe(2);
    const before = order.length;
    const read = await track('read', client.call({ ...quiet, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } }));
    expect(read).toMatchObject({ ok: true, result: { rows: [[0]] } });
    // It went at the next free child: the two runaways that held the children when it came
    // answered before it, and at most a couple more, since on a loaded machine a killed child's
    // replacement may take longer to start than the runaway on the other child to end.
    expect(order.indexOf('read') - before).toBeLessThanOrEqual(4);

    const ends = await Promise.all(burst);
    expect(ends.every((e) => !e.ok && e.error.code === 'STATEMENT_TIMEOUT')).toBe(true);
    // And well inside the burst's first round: most of the burst was still to run.
    expect(order.length - 1 - order.indexOf('read')).toBeGreaterThanOrEqual(BURST / 2);
  }, 180_000);
});
