import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { readUsage } from '../../src/calls/usage.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

// A sequential caller's call is alone in its worker's turn: its announce (the event, the
// metering, the workspace's budget note) goes in the script that completes its job in BullMQ,
// where it was a script of its own sent just before it (issue 31, session 32). What a user
// relies on stays: the answer, each call metered once, the budget's ledger exact; and the job
// is finished by the time its caller hears the answer.

let own: OwnRedis;
let sb: Sandbox;
let client: AgentDbClient;
const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
const CALLS = 40;

beforeAll(async () => {
  // A Redis of its own: its command counts (INFO commandstats) are this test's alone.
  own = await OwnRedis.start();
  sb = sandbox({ SHARD_COUNT: '1', REDIS_URL: own.url });
  await sb.pool();
  client = sb.client();
  expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)' } })).toMatchObject({
    ok: true,
  });
  expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: "INSERT INTO t VALUES (1, 'one')" } })).toMatchObject({ ok: true });
});
afterAll(async () => {
  await sb.cleanup();
  await own.remove();
});

async function scriptsRun(admin: ReturnType<typeof connectRedis>): Promise<number> {
  return Number(/^cmdstat_evalsha:calls=(\d+)/m.exec(await admin.info('commandstats'))?.[1] ?? 0);
}

describe('a lone call announced with its completion', () => {
  it('answers, meters and counts each call once, its job finished when the answer is heard, in one script with the completion', async () => {
    const admin = connectRedis(own.url);
    const keys = keysFor(sb.config.prefix);
    const active = `${keys.bullPrefix}:${keys.queueName(0)}:active`;
    try {
      const usageBefore = await readUsage(admin, keys, 'acme');
      const readsBefore = usageBefore.find((u) => u.tool === 'DATA_QUERY_SQL')?.calls ?? 0;
      const scripts0 = await scriptsRun(admin);
      const stillActive: number[] = [];
      for (let i = 0; i < CALLS; i++) {
        const answer = await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM t WHERE id = ?', params: [1] } });
        expect(answer).toMatchObject({ ok: true, result: { rows: [['one']] } });
        // The worker holds no job once its caller has the answer.
        stillActive.push(await admin.llen(active));
      }
      const scripts = (await scriptsRun(admin)) - scripts0;
      expect(stillActive.filter((n) => n > 0)).toEqual([]);

      // Metered once each.
      const reads = (await readUsage(admin, keys, 'acme')).find((u) => u.tool === 'DATA_QUERY_SQL');
      expect(reads?.calls).toBe(readsBefore + CALLS);
      expect(reads?.credits).toBe(readsBefore + CALLS);
      // The budget's ledger: each call's finished job counted (these and the two writes before),
      // its enqueue's entry let go, and the sum the sum of the entries.
      const { ledger, held } = keys.redisBudget('acme');
      const members = await admin.zrange(ledger, 0, -1);
      const kinds = members.map((m) => m.split('|').at(-1)!.split(':')[0]);
      expect(kinds.filter((k) => k === 'done')).toHaveLength(CALLS + 2);
      expect(kinds.filter((k) => k !== 'done')).toEqual([]);
      const sum = members.reduce((s, m) => s + Number(m.split(':').at(-1)), 0);
      expect(Number(await admin.get(held))).toBe(sum);

      // Per call: the caller's add, the worker's take, and its completion with the announce in
      // it (each a script); the announce was a fourth. A few more for the leases and BullMQ's
      // timers (stalled jobs, locks) while the calls ran.
      expect(scripts).toBeGreaterThanOrEqual(3 * CALLS);
      expect(scripts).toBeLessThan(3 * CALLS + CALLS / 2);
    } finally {
      admin.disconnect();
    }
  });
});
