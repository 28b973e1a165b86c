import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { readExecutors } from '../../src/shards/executor-status-publisher.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

// The hostile review: one member of workspace evil ran 30 CSV exports of a big table at once on the
// web page; their shard ops held all 32 BullMQ slots of the shard, each waiting behind evil's one
// database in the executor, and a one-row read of workspace victim there went from 24 ms to 6.6 s.
// A workspace's shard ops now take its share of the shard, as one agent's calls do.
const settings = { database: 'agent' as const };
const evil = { workspace: 'evil', agent: 'mal', settings };
const victim = { workspace: 'victim', agent: 'vic', settings };
const FOREVER = 'WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT count(*) FROM c';
let sb: Sandbox;
let client: AgentDbClient;
let ops: ShardOpClient;
let redis: Redis;

/** Shard ops' jobs on shard 0's queue, whatever their state. */
async function opJobs(): Promise<number> {
  let n = 0;
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', `${sb.config.prefix}:{shard-0}:op.*`, 'COUNT', 1000);
    cursor = next;
    // A job's hash, not its lock or logs (`…:op.<id>:lock`).
    n += found.filter((k) => !k.slice(k.indexOf(':op.') + 4).includes(':')).length;
  } while (cursor !== '0');
  return n;
}

beforeAll(async () => {
  sb = sandbox({
    SHARD_COUNT: '1',
    WORKER_CONCURRENCY: '4',
    AGENT_SHARD_CONCURRENCY: '1',
    STATEMENT_TIMEOUT_MS: '30000',
    EXECUTOR_POOL_SIZE: '2',
    EXECUTOR_OVERFLOW: '0',
  });
  await sb.pool();
  client = sb.client();
  ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
  redis = new Redis(REDIS_URL);
});

afterAll(async () => {
  await ops.close();
  redis.disconnect();
  await sb.cleanup();
}, 60_000);

describe("a workspace's shard ops on a busy database", () => {
  it('leave other workspaces slots of the shard', async () => {
    for (const who of [evil, victim]) {
      expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v)' } })).toMatchObject({ ok: true });
    }
    // The op client's queue is ready, so the pages below are queued before victim's read.
    expect(await ops.run(0, 'browse.page', { table: 't' }, { db: 'evil/mal' })).toMatchObject({ ok: true });
    // evil's database is busy with a statement that runs until its deadline, or until the test ends it.
    let runawayEnded = false;
    const runaway = client.call({ ...evil, tool: 'DATA_QUERY_SQL', arguments: { sql: FOREVER }, callId: 'runaway' }).finally(() => {
      runawayEnded = true;
    });
    await expect
      .poll(async () => ((await client.result('runaway', { workspace: 'evil', agent: 'mal' })) as { status?: string }).status, {
        interval: 50,
        timeout: 30_000,
      })
      .toBe('running');
    // A person's pages of evil's table, more than the shard has slots: each waits behind the statement.
    const pages = Array.from({ length: 8 }, () => ops.run(0, 'browse.page', { table: 't' }, { db: 'evil/mal', timeoutMs: 60_000 }).catch(() => undefined));
    // Every page is on the queue before victim's read is sent (the warm-up's job went once it was read).
    await expect.poll(() => opJobs(), { interval: 20, timeout: 30_000 }).toBe(8);
    // victim's read still finds a slot while evil's statement runs on.
    const read = await client.call({ ...victim, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } });
    expect(read).toMatchObject({ ok: true, result: { rows: [[0]] } });
    expect(runawayEnded).toBe(false);
    // Once the statement ends, evil's pages (put back meanwhile) are answered too. It is ended by
    // killing its child, rather than by waiting out its deadline (set far past what the test needs).
    const runawayChild = async () =>
      (await readExecutors(redis, keysFor(sb.config.prefix))).flatMap((w) => w.pool.children).find((c) => c.callId === 'runaway');
    await expect.poll(runawayChild, { interval: 50, timeout: 30_000 }).toMatchObject({ state: 'running', pid: expect.any(Number) });
    process.kill((await runawayChild())!.pid!, 'SIGKILL');
    await runaway;
    expect(await Promise.all(pages)).toEqual(Array.from({ length: 8 }, () => expect.objectContaining({ ok: true })));
  }, 90_000);
});
