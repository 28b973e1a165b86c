import http from 'node:http';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { DataBrowser } from '../../src/shards/data-browser.ts';
import { ExportSlots } from '../../src/shards/export-slots.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { signedInCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// A table's export is bounded by its database's size; a view's is not. An agent's endless
// recursive view, exported from the web page, streamed 386 MB in 73 s and went on (session 33,
// R7), holding the database's executor and filling the person's disk. An export now stops before
// it passes EXPORT_MAX_BYTES: its download is cut off (never a file that looks complete), and the
// person's export slot comes back.

const WS = 'acme';
const DB = `${WS}/scout`;
const BY = { workspace: WS, member: 'ada' };
const MiB = 1024 * 1024;
let box: Sandbox;
let web: WebServer;
let client: AgentDbClient;
let ops: ShardOpClient;
let redis: Redis;
let cookie = '';

const write = (sql: string) => client.call({ workspace: WS, agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });

/** The export's status and every byte of its body, and whether the body ended cut off. */
function download(table: string): Promise<{ status: number; bytes: number; body: string; cutOff: boolean }> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${web.url}/data/export.csv?db=${encodeURIComponent(DB)}&table=${table}`, { headers: { cookie, accept: 'text/html' } }, (res) => {
      let bytes = 0;
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => {
        bytes += b.length;
        if (parts.length < 4) parts.push(b);
      });
      const done = (cutOff: boolean) => resolve({ status: res.statusCode ?? 0, bytes, body: Buffer.concat(parts).toString(), cutOff });
      res.on('end', () => done(!res.complete));
      res.on('aborted', () => done(true));
      res.on('error', () => done(true));
    });
    req.on('error', reject);
  });
}

beforeAll(async () => {
  box = sandbox({ EXPORT_MAX_BYTES: String(5 * MiB), STATEMENT_TIMEOUT_MS: '8000' });
  await box.pool();
  client = box.client();
  web = await startWebServer(box);
  ops = new ShardOpClient({ redisUrl: box.config.redisUrl, prefix: box.config.prefix });
  redis = new Redis(box.config.redisUrl);
  cookie = await signedInCookie(web, WS, 'ada', 'member');
  expect(
    await write("CREATE VIEW forever AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT i, printf('%.200c', 'x') AS pad FROM r"),
  ).toMatchObject({ ok: true });
  // Endless and never a row: no byte bound is ever reached, each chunk is a statement.
  expect(await write('CREATE VIEW never AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT i FROM r WHERE i < 0')).toMatchObject({
    ok: true,
  });
  // About 3.2 MB of CSV: under the bound, in two chunks.
  expect(await write('CREATE TABLE t(id INTEGER PRIMARY KEY, pad TEXT)')).toMatchObject({ ok: true });
  expect(
    await write(
      "INSERT INTO t(pad) SELECT printf('%.200c', 'y') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 15000) SELECT i FROM n)",
    ),
  ).toMatchObject({ ok: true });
}, 120_000);

afterAll(async () => {
  await web?.close();
  await ops?.close();
  redis?.disconnect();
  await box?.cleanup();
});

describe('an export stops at EXPORT_MAX_BYTES', () => {
  it('cuts off the download of an endless view after at most the bound, and gives the slot back', async () => {
    const got = await download('forever');
    expect(got.status).toBe(200);
    expect(got.body.startsWith('i,pad\r\n1,')).toBe(true);
    expect(got.cutOff).toBe(true);
    expect(got.bytes).toBeGreaterThan(2 * MiB);
    expect(got.bytes).toBeLessThanOrEqual(5 * MiB);
    // Its slot came back: the member's four exports at once still start, each cut off in turn.
    const four = await Promise.all([1, 2, 3, 4].map(() => download('forever')));
    expect(four.map((d) => [d.status, d.cutOff])).toEqual([
      [200, true],
      [200, true],
      [200, true],
      [200, true],
    ]);
  }, 120_000);

  it('exports a table under the bound whole', async () => {
    const got = await download('t');
    expect(got.status).toBe(200);
    expect(got.cutOff).toBe(false);
    expect(got.bytes).toBeGreaterThan(3_000_000);
  }, 60_000);

  it('stops before the chunk that would pass the bound, with RESOURCE_LIMIT naming it', async () => {
    const slots = new ExportSlots();
    const browser = new DataBrowser({
      ops,
      agents: new AgentRegistry(redis, keysFor(box.config.prefix)),
      shardCount: box.config.shardCount,
      csvChunkChars: 64 * 1024,
      exports: slots,
      exportMaxBytes: MiB,
    });
    let sent = 0;
    const failed = await (async () => {
      for await (const csv of browser.csv(DB, 'forever', BY)) sent += Buffer.byteLength(csv);
    })().catch((err: { code?: string; message?: string }) => err);
    expect(failed).toMatchObject({ code: 'RESOURCE_LIMIT' });
    expect((failed as Error).message).toContain('EXPORT_MAX_BYTES');
    expect(sent).toBeGreaterThan(MiB - 128 * 1024);
    expect(sent).toBeLessThanOrEqual(MiB);
    expect(slots.size).toBe(0);
  }, 60_000);

  it('stops an endless view that yields no row at the statement timeout, STATEMENT_TIMEOUT', async () => {
    const slots = new ExportSlots();
    const browser = new DataBrowser({
      ops,
      agents: new AgentRegistry(redis, keysFor(box.config.prefix)),
      shardCount: box.config.shardCount,
      exports: slots,
      exportMaxBytes: MiB,
    });
    let sent = 0;
    const failed = await (async () => {
      for await (const csv of browser.csv(DB, 'never', BY)) sent += Buffer.byteLength(csv);
    })().catch((err: { code?: string }) => err);
    expect(failed).toMatchObject({ code: 'STATEMENT_TIMEOUT' });
    expect(sent).toBe(0);
    expect(slots.size).toBe(0);
  }, 60_000);
});
