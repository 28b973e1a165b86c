import { existsSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GridPage, PageArgs } from '../../src/contracts/browse.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { DataBrowser } from '../../src/shards/data-browser.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

const WS = 'acme';
const DB = `${WS}/scout`;
/** Who exports, for the export bounds (export-slots.ts). */
const BY = { workspace: WS, member: 'ada' };
let box: Sandbox;
let ops: ShardOpClient;
let redis: Redis;
let browser: DataBrowser;
let client: AgentDbClient;

async function write(sql: string, agent = 'scout') {
  const out = await client.call({ workspace: WS, agent, settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
  expect(out).toMatchObject({ ok: true });
}
async function query(sql: string): Promise<unknown[][]> {
  const out = await client.call({ workspace: WS, agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql, max_rows: 1000 } });
  return (out as unknown as { result: { rows: unknown[][] } }).result.rows;
}

/** Every page from the first, following `last` cursors (or offsets without a key). */
async function walk(args: PageArgs): Promise<GridPage[]> {
  const pages: GridPage[] = [];
  let page = await browser.page(DB, args, BY);
  pages.push(page);
  while (page.hasNext) {
    page = await browser.page(DB, page.keyset ? { ...args, after: page.last! } : { ...args, offset: pages.length * (args.limit ?? 100) }, BY);
    pages.push(page);
  }
  return pages;
}
const firstColumn = (pages: GridPage[]) => pages.flatMap((p) => p.rows.map((r) => r[0]));

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  client = box.client();
  ops = new ShardOpClient({ redisUrl: box.config.redisUrl, prefix: box.config.prefix });
  redis = new Redis(box.config.redisUrl);
  // Small CSV chunks, so an export of this table takes several jobs.
  browser = new DataBrowser({ ops, agents: new AgentRegistry(redis, keysFor(box.config.prefix)), shardCount: box.config.shardCount, csvChunkChars: 1024 });
  await write('CREATE TABLE t(id INTEGER PRIMARY KEY, grp TEXT, n REAL)');
  // Duplicates and NULLs in the sort column: ties are broken by rowid, NULLs sort first.
  await write(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 237)
    INSERT INTO t SELECT i, CASE WHEN i % 5 = 0 THEN NULL ELSE 'g' || (i % 7) END, CASE WHEN i % 3 = 0 THEN NULL ELSE (i * 37) % 11 END FROM s`);
  await write('CREATE VIEW odd AS SELECT id, grp FROM t WHERE id % 2 = 1');
  await write('CREATE TABLE kv(k TEXT PRIMARY KEY, v) WITHOUT ROWID');
  await write("INSERT INTO kv VALUES ('b', 2), ('a', 1), ('c', 3)");
  await write(`CREATE TABLE "we""ird; drop" ("a""b" TEXT, rowid TEXT)`);
  await write(`INSERT INTO "we""ird; drop" VALUES ('x', 'not the rowid')`);
}, 30_000);

afterAll(async () => {
  await ops.close();
  redis.disconnect();
  await box.cleanup();
});

describe('the data browser', () => {
  it.each([
    ['grp', 'asc'],
    ['grp', 'desc'],
    ['n', 'asc'],
    ['n', 'desc'],
  ] as const)('pages by keyset on %s %s to exactly the rows ORDER BY gives, forwards and back', async (sort, dir) => {
    const expected = (await query(`SELECT id FROM t ORDER BY ${sort} ${dir}, rowid ${dir}`)).map((r) => r[0]);
    const pages = await walk({ table: 't', sort, dir, limit: 20 });
    expect(pages.every((p) => p.keyset)).toBe(true);
    expect(firstColumn(pages)).toEqual(expected);
    // Back from the last page with `before` cursors.
    const back: unknown[] = [];
    let page = pages.at(-1)!;
    back.unshift(...page.rows.map((r) => r[0]));
    while (page.hasPrev) {
      page = await browser.page(DB, { table: 't', sort, dir, limit: 20, before: page.first! }, BY);
      back.unshift(...page.rows.map((r) => r[0]));
    }
    expect(back).toEqual(expected);
  });

  it('jumps to a page by offset, counts rows when asked, and says where it is', async () => {
    const page = await browser.page(DB, { table: 't', limit: 20, offset: 200, count: true }, BY);
    expect(page.rows.map((r) => r[0])).toEqual(Array.from({ length: 20 }, (_, i) => 201 + i));
    expect(page).toMatchObject({ total: 237, offset: 200, hasPrev: true, hasNext: true });
    const next = await browser.page(DB, { table: 't', limit: 20, after: page.last! }, BY);
    expect(next.rows.map((r) => r[0])).toEqual(Array.from({ length: 17 }, (_, i) => 221 + i));
    expect(next.hasNext).toBe(false);
  });

  it('pages views and WITHOUT ROWID tables by offset', async () => {
    const view = await walk({ table: 'odd', limit: 50 });
    expect(view[0]!.keyset).toBe(false);
    expect(firstColumn(view)).toHaveLength(119);
    const kv = await walk({ table: 'kv', limit: 2 });
    expect(kv[0]!.keyset).toBe(false);
    expect(firstColumn(kv)).toEqual(['a', 'b', 'c']);
  });

  it('quotes names properly and pages past a column that shadows rowid', async () => {
    const page = await browser.page(DB, { table: 'we"ird; drop', sort: 'a"b' }, BY);
    expect(page.columns.map((c) => c.name)).toEqual(['a"b', 'rowid']);
    expect(page.rows).toEqual([['x', 'not the rowid']]);
    expect(page.keyset).toBe(true);
  });

  it('hides the engine and agentdb tables, as DATA_DESCRIBE_SCHEMA does', async () => {
    const tables = await browser.tables(DB, BY);
    expect(tables.tables.map((t) => t.name).sort()).toEqual(['kv', 'odd', 't', 'we"ird; drop']);
    for (const hidden of ['sqlite_schema', '_agentdb_calls', 'sqlite_master']) {
      await expect(browser.page(DB, { table: hidden }, BY)).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(browser.csv(DB, hidden, BY).next()).rejects.toMatchObject({ code: 'NOT_FOUND' });
    }
    await expect(browser.page(DB, { table: 't', sort: 'nope' }, BY)).rejects.toMatchObject({ code: 'INVALID_ARGUMENTS' });
  });

  it('exports in chunks that join to one CSV, with the header once', async () => {
    let total = -1;
    const chunks: string[] = [];
    for await (const c of browser.csv(DB, 't', BY, (n) => (total = n))) chunks.push(c);
    const csv = chunks.join('');
    expect(total).toBe(237);
    const lines = csv.split('\r\n');
    expect(lines[0]).toBe('id,grp,n');
    expect(lines).toHaveLength(239);
    expect(lines[15]).toBe('15,,');
    expect(chunks.length).toBeGreaterThan(1);
    expect(lines.at(-1)).toBe('');
  });

  it('exports rows that grow past a chunk between its bounds whole, in order, each once', async () => {
    // The first chunk's rows are short, so its bounds are far apart; the rows past them are
    // long, so each range between two bounds takes several chunks (continued before the next range).
    await write('CREATE TABLE grow(id INTEGER PRIMARY KEY, v TEXT)');
    await write(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 400)
      INSERT INTO grow SELECT i, CASE WHEN i < 60 THEN 'x' ELSE printf('%.*c', i, 'y') END FROM s`);
    // Built here rather than read back by a query: the whole table is past a call's inline result.
    const rows = Array.from({ length: 400 }, (_, k) => `${k + 1},${k + 1 < 60 ? 'x' : 'y'.repeat(k + 1)}`);
    expect(await query('SELECT count(*), sum(length(v)) FROM grow')).toEqual([[400, 59 + (400 * 401) / 2 - (59 * 60) / 2]]);
    const expected = ['id,v', ...rows, ''].join('\r\n');
    const chunks: string[] = [];
    for await (const c of browser.csv(DB, 'grow', BY)) chunks.push(c);
    expect(chunks.join('')).toBe(expected);
    expect(chunks.length).toBeGreaterThan(20);
  });

  it('exports each row at most once, in key order, while the table is written to', async () => {
    await write('CREATE TABLE busy(id INTEGER PRIMARY KEY, v TEXT)');
    await write(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 600)
      INSERT INTO busy SELECT i * 10, printf('%040d', i) FROM s`);
    const ids: number[] = [];
    let n = 0;
    for await (const c of browser.csv(DB, 'busy', BY)) {
      ids.push(
        ...c
          .split('\r\n')
          .filter((l) => /^\d/.test(l))
          .map((l) => Number(l.split(',')[0])),
      );
      // Between chunks: rows come and go all over the table, ahead of and behind the export.
      if (n++ < 6) {
        await write(`DELETE FROM busy WHERE id % 70 = ${n * 10}`);
        await write(`INSERT INTO busy SELECT id + ${n}, 'new' FROM busy WHERE id % 90 = 0 AND id + ${n} NOT IN (SELECT id FROM busy)`);
      }
    }
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    // Rows nobody touched are all there.
    const untouched = Array.from({ length: 600 }, (_, i) => (i + 1) * 10).filter((id) => id % 70 === 0);
    expect(untouched.filter((id) => !ids.includes(id))).toEqual([]);
  });

  it('exports every row of a table whose header alone fills a chunk', async () => {
    // Five names of 250 bytes: the header passes the 1 KB chunk before any row. A chunk that
    // stopped there had no last key, and the export went on from "past NULL": nothing.
    const names = Array.from({ length: 5 }, (_, i) => `c${i}`.padEnd(250, 'x'));
    await write(`CREATE TABLE wide(id INTEGER PRIMARY KEY, ${names.map((n) => `"${n}"`).join(', ')})`);
    await write(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 30) INSERT INTO wide(id) SELECT i FROM s`);
    const chunks: string[] = [];
    for await (const c of browser.csv(DB, 'wide', BY)) chunks.push(c);
    const ids = chunks
      .join('')
      .split('\r\n')
      .slice(1, -1)
      .map((l) => Number(l.split(',')[0]));
    expect(ids).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
  });

  it('never repeats the table when it loses its rowid names mid-export', async () => {
    // Columns named rowid, _rowid_ and oid leave no name for the key: ranges asked for by key
    // would each be read from the start by offset.
    await write('CREATE TABLE shifty(id INTEGER, v TEXT)');
    await write(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 300) INSERT INTO shifty SELECT i, printf('%030d', i) FROM s`);
    const ids: number[] = [];
    let n = 0;
    let failed: unknown;
    try {
      for await (const c of browser.csv(DB, 'shifty', BY)) {
        ids.push(
          ...c
            .split('\r\n')
            .filter((l) => /^\d/.test(l))
            .map((l) => Number(l.split(',')[0])),
        );
        // Made anew with all three names as columns (SQLite 3.54 no longer adds such a column
        // with ALTER TABLE ADD COLUMN), the same rows in it.
        if (n++ === 0) {
          await write('ALTER TABLE shifty RENAME TO shifty_was');
          await write('CREATE TABLE shifty(id INTEGER, v TEXT, rowid TEXT, _rowid_ TEXT, oid TEXT)');
          await write('INSERT INTO shifty(id, v) SELECT id, v FROM shifty_was');
        }
      }
    } catch (err) {
      failed = err;
    }
    expect(new Set(ids).size).toBe(ids.length);
    // It cannot go on from where it was: it stops (the download aborts), never repeats.
    expect(failed).toMatchObject({ code: 'NOT_FOUND' });
  });

  it('lists the shared database and each agent with a file, and reads a missing one without creating it', async () => {
    await write('CREATE TABLE x(a)', 'helper');
    const dbs = await browser.databases(WS);
    expect(dbs.map((d) => d.id)).toEqual([WS, `${WS}/helper`, DB]);
    const ghost = `${WS}/ghost`;
    await expect(browser.page(ghost, { table: 't' }, BY)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(existsSync(databasePath(box.dataDir, WS, 'ghost', shardOf(ghost, box.config.shardCount)))).toBe(false);
  });

  it('refuses a member of another workspace its tables, pages and CSV, whatever adapter asks (session 31, H6: only the web page checked)', async () => {
    const stranger = { workspace: 'globex', member: 'eve' };
    const refused = { code: 'NOT_FOUND', detail: 'there is no database acme/scout in workspace globex: a key reads the databases of its own workspace only' };
    await expect(browser.tables(DB, stranger)).rejects.toMatchObject(refused);
    await expect(browser.page(DB, { table: 't' }, stranger)).rejects.toMatchObject(refused);
    await expect(browser.csv(DB, 't', stranger).next()).rejects.toMatchObject(refused);
  });
});
