import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GridPage } from '../../src/contracts/browse.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { DataBrowser } from '../../src/shards/data-browser.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// A keyset page link carries the sort column's value of the page's last row. Sorted by a column
// of long text, that value made the Next link longer than a request line may be (Node answers
// 431 past 16 KB): the grid could not page past the first page. A cursor carries a long value
// by its row's key instead, and the owner reads the value back from that row.

const WS = 'acme';
const DB = `${WS}/scout`;
/** Who reads: a member of the workspace. */
const BY = { workspace: WS, member: 'ada' };
let box: Sandbox;
let ops: ShardOpClient;
let redis: Redis;
let browser: DataBrowser;
let client: AgentDbClient;

async function call(tool: 'DATA_WRITE_SQL' | 'DATA_QUERY_SQL', sql: string) {
  return client.call({
    workspace: WS,
    agent: 'scout',
    settings: { database: 'agent' },
    tool,
    arguments: { sql, ...(tool === 'DATA_QUERY_SQL' ? { max_rows: 1000 } : {}) },
  });
}

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  client = box.client();
  ops = new ShardOpClient({ redisUrl: box.config.redisUrl, prefix: box.config.prefix });
  redis = new Redis(box.config.redisUrl);
  browser = new DataBrowser({ ops, agents: new AgentRegistry(redis, keysFor(box.config.prefix)), shardCount: box.config.shardCount });
  expect(await call('DATA_WRITE_SQL', 'CREATE TABLE longs(t TEXT)')).toMatchObject({ ok: true });
  // Inserted out of order, with ties and NULLs, so the sort is not rowid order.
  const fill = `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 60)
    INSERT INTO longs SELECT CASE WHEN i % 9 = 0 THEN NULL ELSE printf('%02d', (i * 7) % 23) || printf('%.*c', 20000, 'y') END FROM c`;
  expect(await call('DATA_WRITE_SQL', fill)).toMatchObject({ ok: true });
}, 30_000);

afterAll(async () => {
  await ops.close();
  redis.disconnect();
  await box.cleanup();
});

describe('paging sorted by a column of long text', () => {
  it.each(['asc', 'desc'] as const)('walks every row in ORDER BY order (%s) with page links that fit in a URL', async (dir) => {
    const expected = (
      (await call('DATA_QUERY_SQL', `SELECT rowid FROM longs ORDER BY t ${dir}, rowid ${dir}`)) as unknown as { result: { rows: number[][] } }
    ).result.rows.map((r) => r[0]);
    const args = { table: 'longs', sort: 't', dir, limit: 25 };
    const pages: GridPage[] = [await browser.page(DB, args, BY)];
    while (pages.at(-1)!.hasNext) {
      const last = pages.at(-1)!.last!;
      expect(JSON.stringify(last).length).toBeLessThan(1024);
      pages.push(await browser.page(DB, { ...args, after: last }, BY));
    }
    const seen = pages.flatMap((p) => p.rows.map((r) => (r[0] === null ? null : (r[0] as { cut: string }).cut.slice(0, 2))));
    const want = (
      (await call('DATA_QUERY_SQL', `SELECT substr(t, 1, 2) FROM longs ORDER BY t ${dir}, rowid ${dir}`)) as unknown as { result: { rows: unknown[][] } }
    ).result.rows.map((r) => r[0]);
    expect(seen).toEqual(want);
    expect(seen).toHaveLength(expected.length);
    // And back from the last page with `before` cursors.
    let page = pages.at(-1)!;
    const back = [...page.rows];
    while (page.hasPrev) {
      expect(JSON.stringify(page.first).length).toBeLessThan(1024);
      page = await browser.page(DB, { ...args, before: page.first! }, BY);
      back.unshift(...page.rows);
    }
    expect(back.map((r) => (r[0] === null ? null : (r[0] as { cut: string }).cut.slice(0, 2)))).toEqual(want);
  });
});
