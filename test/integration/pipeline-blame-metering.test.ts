import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Envelope } from '../../src/contracts/envelope.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { readUsage } from '../../src/calls/usage.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Review 16b through the queue: a member's big read of a shared table and another agent's
// child-killing read of the same database, sent together. Each is metered for what it did:
// the read answers ok (one credit, once), the killer RESOURCE_LIMIT (one credit, once).
// (test/integration/pipeline-blame.test.ts pins the pipelining itself down at the pool.)

const ROUNDS = 3;

let sb: Sandbox;
let client: AgentDbClient;

beforeAll(async () => {
  // The big read's 810 KB answer whole, as MAX_RESULT_BYTES was before it became 64 KiB.
  sb = sandbox({ SHARD_COUNT: '1', EXECUTOR_POOL_SIZE: '2', MAX_RESULT_BYTES: String(1024 * 1024) });
  await sb.pool();
  client = sb.client();
});
afterAll(() => sb.cleanup());

const call = async (agent: string, settings: Record<string, unknown>, tool: string, args: unknown): Promise<Envelope> =>
  (await client.call({ workspace: 'meter', agent, settings, tool, arguments: args })) as Envelope;
const code = (env: Envelope) => (env.ok ? 'ok' : env.error.code);

async function usage() {
  const redis = connectRedis(sb.config.redisUrl);
  try {
    return (await readUsage(redis, keysFor(sb.config.prefix), 'meter')).map(({ agent, tool, calls, credits }) => ({ agent, tool, calls, credits }));
  } finally {
    redis.disconnect();
  }
}

it("meters a big read sent with another caller's child-killing read once, and the killer once", async () => {
  const writer = { database: 'workspace', sharedData: true };
  const reader = { database: 'workspace' };
  const made = await call('ada', writer, 'DATA_WRITE_SQL', {
    scope: 'workspace',
    sql: "CREATE TABLE notes AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 900) SELECT i, printf('%.*c', 900, 'v') AS note FROM n",
  });
  expect(code(made)).toBe('ok');
  const answers: string[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const [v, b] = await Promise.all([
      call('ada', reader, 'DATA_QUERY_SQL', { scope: 'workspace', sql: 'SELECT * FROM notes', max_rows: 1000 }),
      call('bad', reader, 'DATA_QUERY_SQL', { scope: 'workspace', sql: "SELECT printf('%.*c', 300000000, 'x') AS s" }),
    ]);
    answers.push(`${code(v)}:${v.ok ? (v.result as { rows: unknown[] }).rows.length : ''} ${code(b)}`);
  }
  expect(answers).toEqual(Array.from({ length: ROUNDS }, () => 'ok:900 RESOURCE_LIMIT'));
  expect((await usage()).sort((a, b) => `${a.agent}${a.tool}`.localeCompare(`${b.agent}${b.tool}`))).toEqual([
    { agent: 'ada', tool: 'DATA_QUERY_SQL', calls: ROUNDS, credits: ROUNDS },
    { agent: 'ada', tool: 'DATA_WRITE_SQL', calls: 1, credits: 2 },
    { agent: 'bad', tool: 'DATA_QUERY_SQL', calls: ROUNDS, credits: ROUNDS },
  ]);
});
