import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 32, T10 ordered a long shard queue by workspace in turn, but only for jobs the admitted
// add's script added: a call with the caller's own id (claimed between admission and add) and a
// traced call take BullMQ's own `queue.add`, and stayed on the FIFO wait list. A burst of them
// (client-chosen ids through /v1/calls or /mcp) still held another workspace's first read behind
// all of it. They are now placed by the same rule, right after their add (session 33, T11).
const settings = { database: 'agent' as const };
const BURST = 300;
let sb: Sandbox;
let redis: Redis;

beforeAll(() => {
  sb = sandbox({ SHARD_COUNT: '1', WORKER_CONCURRENCY: '4' });
  redis = new Redis(REDIS_URL);
});

afterAll(async () => {
  redis.disconnect();
  await sb.cleanup();
}, 60_000);

/** Jobs waiting on shard 0: on the wait list and in the prioritized set. */
async function queued(): Promise<number> {
  const keys = keysFor(sb.config.prefix);
  const queue = `${keys.bullPrefix}:${keys.queueName(0)}`;
  return (await redis.llen(`${queue}:wait`)) + (await redis.zcard(`${queue}:prioritized`));
}

/** Where `quiet`'s read finished among `loud`'s burst, sent by `loudClient` with `ownIds` or not. */
async function quietPlace(loudClient: AgentDbClient, quietClient: AgentDbClient, ownIds: boolean, tag: string): Promise<number> {
  const done: string[] = [];
  const read = (c: AgentDbClient, workspace: string, agent: string, label: string, callId?: string) =>
    c
      .call({ workspace, agent, settings, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' }, ...(callId ? { callId } : {}) }, { timeoutMs: 120_000 })
      .then((answer) => {
        done.push(label);
        return answer;
      });
  const before = await queued();
  const burst = Array.from({ length: BURST }, (_, i) => read(loudClient, `loud${tag}`, `a${i % 4}`, `loud-${i}`, ownIds ? `own-${randomUUID()}` : undefined));
  await expect.poll(queued, { interval: 20, timeout: 30_000 }).toBe(before + BURST);
  const quiet = read(quietClient, `quiet${tag}`, 'q', 'quiet');
  await expect.poll(queued, { interval: 20, timeout: 30_000 }).toBe(before + BURST + 1);
  const pool = await sb.pool();
  const answers = await Promise.all([quiet, ...burst]);
  expect(answers.every((a) => a.ok)).toBe(true);
  await pool.stop();
  return done.indexOf('quiet');
}

it("a burst of calls under the caller's own ids no longer holds another workspace's first read behind it", async () => {
  const c = sb.client();
  expect(await quietPlace(c, c, true, 'own')).toBeLessThan(BURST / 2);
}, 120_000);

it('nor does a burst of traced calls', async () => {
  const traced = sb.client({ tracing: true });
  expect(await quietPlace(traced, sb.client(), false, 'traced')).toBeLessThan(BURST / 2);
}, 120_000);
