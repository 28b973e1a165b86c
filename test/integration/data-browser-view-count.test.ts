import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CsvChunk } from '../../src/contracts/browse.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { DataBrowser } from '../../src/shards/data-browser.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// Counting a view runs its whole query, and an agent's view can be endless (a recursive CTE with
// no stop). DATA_DESCRIBE_SCHEMA never counts views for that reason; the grid's first page and
// the export's first chunk did, so such a view could never be shown or exported: each try ran
// into the statement deadline and cost an executor child.

const WS = 'acme';
const DB = `${WS}/scout`;
/** Who reads: a member of the workspace. */
const BY = { workspace: WS, member: 'ada' };
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
  browser = new DataBrowser({ ops, agents: new AgentRegistry(redis, keysFor(box.config.prefix)), shardCount: box.config.shardCount, csvChunkChars: 1024 });
  const sql = 'CREATE VIEW endless AS WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) SELECT i FROM c';
  const out = await client.call({ workspace: WS, agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
  expect(out).toMatchObject({ ok: true });
}, 30_000);

afterAll(async () => {
  await ops.close();
  redis.disconnect();
  await box.cleanup();
});

describe('views are not counted', () => {
  it('shows the first page of an endless view, without a total', async () => {
    const page = await browser.page(DB, { table: 'endless', limit: 25, count: true }, BY);
    expect(page.rows.map((r) => r[0])).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    expect(page.hasNext).toBe(true);
    expect(page.total).toBeUndefined();
  });

  it('starts an export of an endless view, without a total', async () => {
    // The op itself, not DataBrowser.csv: that one fetches the next chunk ahead, and an endless
    // export stopped early would leave it running into the test's teardown.
    const out = await ops.run(shardOf(DB, box.config.shardCount), 'browse.csv', { table: 'endless', maxChars: 1024 }, { db: DB });
    expect(out.ok).toBe(true);
    const chunk = (out as { result: CsvChunk }).result;
    expect(chunk.csv.startsWith('i\r\n1\r\n2\r\n')).toBe(true);
    expect(chunk.next).toBeDefined();
    expect(chunk.total).toBeUndefined();
  });
});
