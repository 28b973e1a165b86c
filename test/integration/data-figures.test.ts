import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { DataBrowser } from '../../src/shards/data-browser.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { ROW_COUNT_CAP } from '../../src/sqlite/sqlite-figures.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

// The Data page's figures of a database (issue 29 part 5): size, tables, rows and last write,
// read by the database's owner as a shard op, rows counted up to a cap per table.
const WS = 'acme';
let box: Sandbox;
let ops: ShardOpClient;
let redis: Redis;
let browser: DataBrowser;
let client: AgentDbClient;

async function write(sql: string, agent = 'scout') {
  const out = await client.call({ workspace: WS, agent, settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
  expect(out).toMatchObject({ ok: true });
}

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  client = box.client();
  ops = new ShardOpClient({ redisUrl: box.config.redisUrl, prefix: box.config.prefix });
  redis = new Redis(box.config.redisUrl);
  browser = new DataBrowser({ ops, agents: new AgentRegistry(redis, keysFor(box.config.prefix)), shardCount: box.config.shardCount });
}, 30_000);

afterAll(async () => {
  await ops?.close();
  redis?.disconnect();
  await box?.cleanup();
});

it('counts tables and rows exactly below the cap, leaves views out, and dates the last write', async () => {
  const before = Date.now();
  await write('CREATE TABLE a(id INTEGER PRIMARY KEY, v TEXT)');
  await write("INSERT INTO a(v) VALUES ('x'), ('y'), ('z')");
  await write('CREATE TABLE kv(k TEXT PRIMARY KEY, v) WITHOUT ROWID');
  await write("INSERT INTO kv VALUES ('k', 1)");
  await write('CREATE VIEW av AS SELECT * FROM a');
  const after = Date.now();
  const f = await browser.figures(`${WS}/scout`);
  expect(f).toMatchObject({ tables: 2, rows: 4 });
  expect(f.rowsAtLeast).toBeUndefined();
  expect(f.bytes).toBeGreaterThan(0);
  // The file's clock is the file system's, whole milliseconds at worst.
  expect(f.lastWriteAt).toBeGreaterThanOrEqual(before - 1000);
  expect(f.lastWriteAt).toBeLessThanOrEqual(after + 1000);
});

it('counts a table past the cap only up to it, and says the figure is a lower bound', { timeout: 60_000 }, async () => {
  await write('CREATE TABLE big(n INTEGER)', 'miner');
  await write(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${ROW_COUNT_CAP + 5}) INSERT INTO big SELECT i FROM s`, 'miner');
  await write('CREATE TABLE small(n INTEGER)', 'miner');
  await write('INSERT INTO small VALUES (1), (2)', 'miner');
  const f = await browser.figures(`${WS}/miner`);
  expect(f).toMatchObject({ tables: 2, rows: ROW_COUNT_CAP + 2, rowsAtLeast: true });
});

it('answers zeros and no last write for a database with no file yet, creating none', async () => {
  expect(await browser.figures(`${WS}/nobody`)).toEqual({ bytes: 0, tables: 0, rows: 0, lastWriteAt: null });
  expect((await browser.databases(WS)).map((d) => d.id)).not.toContain(`${WS}/nobody`);
});

it('shows the figures counted in the last 30 s again instead of counting anew, and counts again after', async () => {
  // Each count reads every table up to its cap on an executor: reloads must not recount (review 19, H29).
  await write('CREATE TABLE k(n INTEGER)', 'kept');
  await write('INSERT INTO k VALUES (1)', 'kept');
  const t0 = Date.now();
  expect(await browser.figures(`${WS}/kept`, t0)).toMatchObject({ rows: 1 });
  await write('INSERT INTO k VALUES (2), (3)', 'kept');
  expect(await browser.figures(`${WS}/kept`, t0 + 29_000)).toMatchObject({ rows: 1 });
  expect(await browser.figures(`${WS}/kept`, t0 + 30_000)).toMatchObject({ rows: 3 });
});
