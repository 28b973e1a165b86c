import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { DataBrowser } from '../../src/shards/data-browser.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// A view costs its agent a few bytes of schema, yet each of its rows can be a value of any size
// (printf('%.*c', …) makes one of millions of characters). A grid page shows 500 characters of a
// cell, but reading every value of a page whole first would put the whole page's values in the
// executor child's memory at once: 101 rows of 12 MB each passes the child's limit, and opening
// the grid would kill the child (RESOURCE_LIMIT) while the agent's own query of the view works.

const WS = 'acme';
const DB = `${WS}/scout`;
/** Who reads: a member of the workspace. */
const BY = { workspace: WS, member: 'ada' };
const BIG = 12_000_000;
let box: Sandbox;
let ops: ShardOpClient;
let redis: Redis;
let browser: DataBrowser;
let client: AgentDbClient;

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  client = box.client();
  ops = new ShardOpClient({ redisUrl: box.config.redisUrl, prefix: box.config.prefix });
  redis = new Redis(box.config.redisUrl);
  browser = new DataBrowser({ ops, agents: new AgentRegistry(redis, keysFor(box.config.prefix)), shardCount: box.config.shardCount });
  const sql = `CREATE VIEW huge AS WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 150)
    SELECT i, printf('%.*c', ${BIG}, 'x') AS v, zeroblob(${BIG}) AS b FROM c`;
  const out = await client.call({ workspace: WS, agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
  expect(out).toMatchObject({ ok: true });
  // SQLite's length() and substr() of text stop at a NUL character; what follows must still show.
  const hidden = `CREATE VIEW hidden AS SELECT 'fine' || char(0) || 'the rest, ' || printf('%.*c', 1000, 'z') AS v`;
  const made = await client.call({ workspace: WS, agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql: hidden } });
  expect(made).toMatchObject({ ok: true });
}, 30_000);

afterAll(async () => {
  await ops.close();
  redis.disconnect();
  await box.cleanup();
});

describe('a grid page of huge values', () => {
  it('cuts text and sizes blobs without reading the page whole', async () => {
    const page = await browser.page(DB, { table: 'huge', limit: 100 }, BY);
    expect(page.rows).toHaveLength(100);
    expect(page.hasNext).toBe(true);
    const [i, v, b] = page.rows[0]!;
    expect(i).toBe(1);
    expect(v).toEqual({ cut: 'x'.repeat(500), length: BIG }); // bytes of UTF-8
    expect(b).toEqual({ blob: BIG });
  });

  it('shows text past a NUL character, and says how long the whole value is', async () => {
    const page = await browser.page(DB, { table: 'hidden', limit: 10 }, BY);
    const whole = `fine\u0000the rest, ${'z'.repeat(1000)}`;
    expect(page.rows[0]![0]).toEqual({ cut: whole.slice(0, 500), length: Buffer.byteLength(whole) });
  });
});
