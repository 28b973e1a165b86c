import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { WorkspaceRedisBudget } from '../../src/calls/workspace-redis-budget.ts';
import { databaseId, shardOf } from '../../src/contracts/database-id.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../../test/helpers/harness.ts';

// H4 (medium; mitigated on f-H in 16cec1e: the stream keeps ~1,000 events a shard, not 10,000,
// so at most ~16 MB of envelopes a shard, ~256 MB over 16 shards, shared; this test still fails,
// as any stream entry outlives its count in the budget; the completed jobs of a shard no other
// job finishes on outlived RESULT_TTL_HOURS too, until the nightly prune of fbc02e0). The budget counts a completed call's envelope twice (job + BullMQ's
// event stream `completed` entry, with the returnvalue) until RESULT_TTL_HOURS, then gives the
// room back. But BullMQ trims a queue's event stream by count (~10,000 events, on adds), never by
// age, so the envelopes stay there after the budget forgot them; and BullMQ removes completed
// jobs by age only when another job of that queue finishes (moveToFinished →
// removeJobsByMaxAge), so on a shard nobody else uses the jobs stay too. Measured against
// `agentdb start`: 40 reads of a 60 KB row → `{shard-7}:events` XLEN 169 (4.2 events a call),
// 2.73 MB; budget held 5.45 MB. A shard's stream keeps ~2,380 completed envelopes ≈ 150 MB: 16
// shards ≈ 2.4 GB that a pro workspace (128 MiB budget) can leave over ~3 weeks of refilling its
// budget each day with agents whose databases fall on the next quiet shard.
const BIG = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<40) SELECT i, printf('%.1000c','x') AS s FROM c";
const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
let sb: Sandbox;
let client: AgentDbClient;
beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  client = sb.client();
});
afterAll(async () => {
  await sb.cleanup();
  redis.disconnect();
});

it("what Redis keeps of a workspace's calls after the budget gave the room back is bounded", async () => {
  const who = { workspace: 'hog', agent: 'scout', settings: { database: 'agent' as const } };
  for (let i = 0; i < 10; i++) expect(await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: BIG, max_rows: 100 } })).toMatchObject({ ok: true });
  const keys = keysFor(sb.config.prefix);
  const stream = `${keys.bullPrefix}:${keys.queueName(shardOf(databaseId('hog', 'scout'), sb.config.shardCount))}:events`;
  const budget = new WorkspaceRedisBudget(redis, keys);
  // A minute past RESULT_TTL_HOURS after the last call (and past any parked call's approval wait).
  const later = Date.now() + sb.config.resultTtlS * 1000 + sb.config.approvalTtlMs + 60_000;
  const { held } = await budget.note('hog', [], later);
  const streamBytes = (await redis.call('MEMORY', 'USAGE', stream, 'SAMPLES', '0')) as number;
  // On main: held 0, the stream still ~430 KB of this workspace's envelopes.
  expect(streamBytes).toBeLessThanOrEqual(held + 64 * 1024);
});
