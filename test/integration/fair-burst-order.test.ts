import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 32, T9 then T10: a shard's queue was one FIFO list. The workspace's share bounds what
// runs at once, not what is taken next, so one workspace's burst of 1,000 cheap reads delayed
// another workspace's first read from ~20 ms to 0.4-2.8 s: it waited for the whole burst to be
// taken. Past a short queue, jobs now wait in BullMQ's prioritized set by workspace in turn.
const settings = { database: 'agent' as const };
const BURST = 300;
let sb: Sandbox;
let client: AgentDbClient;
let redis: Redis;

beforeAll(() => {
  sb = sandbox({ SHARD_COUNT: '1', WORKER_CONCURRENCY: '4' });
  client = sb.client();
  redis = new Redis(REDIS_URL);
});

afterAll(async () => {
  redis.disconnect();
  await sb.cleanup();
}, 60_000);

/** Jobs waiting on shard 0 of `site`: on the wait list and in the prioritized set. */
async function queued(site = sb): Promise<number> {
  const keys = keysFor(site.config.prefix);
  const queue = `${keys.bullPrefix}:${keys.queueName(0)}`;
  return (await redis.llen(`${queue}:wait`)) + (await redis.zcard(`${queue}:prioritized`));
}

it("a workspace with nothing queued is taken before another workspace's burst is half done", async () => {
  const done: string[] = [];
  const read = (workspace: string, agent: string, label: string) =>
    client.call({ workspace, agent, settings, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } }, { timeoutMs: 120_000 }).then((answer) => {
      done.push(label);
      return answer;
    });
  // The burst is all queued before the quiet workspace's call, and before any worker runs.
  const burst = Array.from({ length: BURST }, (_, i) => read('loud', `a${i % 4}`, `loud-${i}`));
  await expect.poll(queued, { interval: 20, timeout: 30_000 }).toBe(BURST);
  const quiet = read('quiet', 'q', 'quiet');
  await expect.poll(queued, { interval: 20, timeout: 30_000 }).toBe(BURST + 1);
  await sb.pool();
  const answers = await Promise.all([quiet, ...burst]);
  expect(answers.every((a) => a.ok)).toBe(true);
  expect(done.indexOf('quiet')).toBeLessThan(BURST / 2);
}, 120_000);

it('two bursting workspaces take turns: the second burst runs beside the first, not after it', async () => {
  const site = sandbox({ SHARD_COUNT: '1', WORKER_CONCURRENCY: '4' });
  try {
    const c = site.client();
    const done: string[] = [];
    const read = (workspace: string, i: number) =>
      c
        .call({ workspace, agent: `${workspace}-${i % 4}`, settings, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } }, { timeoutMs: 120_000 })
        .then((answer) => {
          done.push(workspace);
          return answer;
        });
    const first = Array.from({ length: 200 }, (_, i) => read('first', i));
    await expect.poll(() => queued(site), { interval: 20, timeout: 30_000 }).toBe(200);
    const second = Array.from({ length: 200 }, (_, i) => read('second', i));
    await expect.poll(() => queued(site), { interval: 20, timeout: 30_000 }).toBe(400);
    await site.pool();
    expect((await Promise.all([...first, ...second])).every((a) => a.ok)).toBe(true);
    // FIFO ran the first burst whole (200) before the second's first call.
    expect(done.slice(0, 200).filter((w) => w === 'second').length).toBeGreaterThanOrEqual(50);
  } finally {
    await site.cleanup();
  }
}, 120_000);
