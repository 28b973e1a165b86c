import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { buildActivity } from '../helpers/activity-build.ts';
import { REDIS_URL, sandbox, type Sandbox } from '../helpers/harness.ts';
import { opJobsLeft } from '../helpers/shard-op-jobs.ts';

// Hostile review T14 (session 35): a shard op's job was kept five minutes after it finished, its
// result inline up to 16 KiB (OP_INLINE_BYTES), in no workspace's Redis budget. An admin paging a
// database's activity at 16 KiB a page (charged a tenth of a call) left 733 jobs, 34 MB of Redis,
// in 10 s from one process: at a member's 600 calls a minute, ~100 pages a second, ~0.5 GB held.
// The op's one caller reads its outcome and now removes its job.

let sb: Sandbox;
let redis: Redis;
let ops: ShardOpClient;
let history: HistoryClient;
const id = 'acme/scout';

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  redis = new Redis(REDIS_URL);
  ops = new ShardOpClient({ redisUrl: sb.config.redisUrl, prefix: sb.config.prefix });
  history = new HistoryClient(ops, sb.config.shardCount);
  const file = databasePath(sb.config.dataDir, 'acme', 'scout', shardOf(id, sb.config.shardCount));
  fs.mkdirSync(path.dirname(file), { recursive: true });
  buildActivity(sb.config.dataDir, file, 30, id).close();
});
afterAll(async () => {
  await ops.close();
  await redis.quit();
  await sb.cleanup();
});

it("a shard op's job goes once its caller has the outcome: pages read leave no job behind", async () => {
  const caller = { member: { workspace: 'acme', name: 'ada', role: 'admin' as const } };
  for (let i = 0; i < 20; i++) {
    const page = await history.activity(id, { limit: 5 }, caller);
    expect(page.entries.length).toBe(5);
  }
  // main: 20, each with its page inline, kept 5 minutes.
  expect(await opJobsLeft(redis, sb.config.prefix)).toBe(0);
});
