import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { DataBrowser } from '../../src/shards/data-browser.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Session 31, T8 (a hostile tenant): the Data page's list of databases asked every shard's owner
// for the workspace's agents with a file (one `browse.files` shard op per shard, 16 by default) on
// every view, for the list's one lookup (a tenth of a call): a member reloading sent the shards'
// workers 160 times the jobs a call costs. The list is kept 30 s, as the figures are.

const WS = 'lister';
let box: Sandbox;
let ops: ShardOpClient;
let redis: Redis;
let client: AgentDbClient;
const asked: string[] = [];

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  client = box.client();
  ops = new ShardOpClient({ redisUrl: box.config.redisUrl, prefix: box.config.prefix });
  redis = new Redis(box.config.redisUrl);
}, 30_000);
afterAll(async () => {
  await ops?.close();
  redis?.disconnect();
  await box?.cleanup();
});

/** A browser whose shard ops are counted by name (the real client does them). */
function browser(): DataBrowser {
  const counted = { run: (shard: number, op: string, ...rest: unknown[]) => (asked.push(op), (ops.run as (...a: unknown[]) => unknown)(shard, op, ...rest)) };
  return new DataBrowser({
    ops: counted as unknown as ShardOpClient,
    agents: new AgentRegistry(redis, keysFor(box.config.prefix)),
    shardCount: box.config.shardCount,
  });
}

it("keeps a workspace's agents on disk for 30 s: a reload asks no shard, and after that they are asked again", async () => {
  const out = await client.call({
    workspace: WS,
    agent: 'disk',
    settings: { database: 'agent' },
    tool: 'DATA_WRITE_SQL',
    arguments: { sql: 'CREATE TABLE t(x)' },
  });
  expect(out).toMatchObject({ ok: true });
  const b = browser();
  const t0 = Date.now();
  expect((await b.databases(WS, t0)).map((d) => d.id)).toEqual([WS, `${WS}/disk`]);
  const first = asked.filter((op) => op === 'browse.files').length;
  expect(first).toBe(box.config.shardCount);
  for (let i = 0; i < 5; i++) expect((await b.databases(WS, t0 + 1000 * i)).map((d) => d.id)).toEqual([WS, `${WS}/disk`]);
  expect(asked.filter((op) => op === 'browse.files')).toHaveLength(first);
  await b.databases(WS, t0 + 31_000);
  expect(asked.filter((op) => op === 'browse.files')).toHaveLength(2 * first);
});
