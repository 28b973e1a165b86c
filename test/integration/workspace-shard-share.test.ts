import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { readExecutors } from '../../src/shards/executor-status-publisher.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 30, T7 (a hostile tenant): a shard worker bounded one agent's calls on a shard
// (AGENT_SHARD_CONCURRENCY), not one workspace's. A workspace of four agents, each with a runaway
// statement (as many agents as WORKER_CONCURRENCY / AGENT_SHARD_CONCURRENCY), held every BullMQ
// slot of the shard, three of them only waiting for the workspace's share of the executor, and
// another workspace's one-row read there waited until one of the runaways reached its deadline.
const settings = { database: 'agent' as const };
const FOREVER = 'WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT count(*) FROM c';
const EVIL = ['a1', 'a2', 'a3', 'a4'];
let sb: Sandbox;
let client: AgentDbClient;
let redis: Redis;

beforeAll(async () => {
  sb = sandbox({
    SHARD_COUNT: '1',
    WORKER_CONCURRENCY: '4',
    AGENT_SHARD_CONCURRENCY: '1',
    STATEMENT_TIMEOUT_MS: '60000',
    EXECUTOR_POOL_SIZE: '2',
    EXECUTOR_OVERFLOW: '0',
  });
  await sb.pool();
  client = sb.client();
  redis = new Redis(REDIS_URL);
});

afterAll(async () => {
  redis.disconnect();
  await sb.cleanup();
}, 60_000);

/** The state of a call of workspace evil. */
async function stateOf(agent: string): Promise<string | undefined> {
  const answer = await client.result(`runaway-${agent}`, { workspace: 'evil', agent });
  return 'status' in answer ? answer.status : answer.ok ? 'ok' : answer.error.code;
}

it("one workspace's agents cannot take every slot of a shard: another workspace's read runs beside their runaways", async () => {
  expect(await client.call({ workspace: 'victim', agent: 'vic', settings, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v)' } })).toMatchObject({
    ok: true,
  });
  let runawaysEnded = 0;
  const runaways = EVIL.map((agent) =>
    client
      .call({ workspace: 'evil', agent, settings, tool: 'DATA_QUERY_SQL', arguments: { sql: FOREVER }, callId: `runaway-${agent}` }, { timeoutMs: 120_000 })
      .finally(() => runawaysEnded++),
  );
  // One runaway runs in the workspace's child; the others are taken by the worker or put back.
  await expect
    .poll(async () => (await Promise.all(EVIL.map(stateOf))).filter((s) => s === 'running').length, { interval: 50, timeout: 30_000 })
    .toBeGreaterThan(0);
  try {
    // The victim's read is answered while every runaway still runs or waits.
    const read = await client.call(
      { workspace: 'victim', agent: 'vic', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } },
      { timeoutMs: 20_000 },
    );
    expect(read).toMatchObject({ ok: true, result: { rows: [[0]] } });
    expect(runawaysEnded).toBe(0);
  } finally {
    // The runaways are ended by killing their children, one after another, as each gets one.
    const ids = new Set(EVIL.map((a) => `runaway-${a}`));
    const running = async () =>
      (await readExecutors(redis, keysFor(sb.config.prefix)))
        .flatMap((w) => w.pool.children)
        .find((c) => c.callId !== undefined && ids.has(c.callId) && c.state === 'running' && c.pid !== undefined);
    while (ids.size > 0) {
      await expect.poll(running, { interval: 50, timeout: 60_000 }).toBeDefined();
      const child = (await running())!;
      ids.delete(child.callId!);
      process.kill(child.pid!, 'SIGKILL');
    }
    await Promise.all(runaways);
  }
}, 120_000);
