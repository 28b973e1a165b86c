import { mkdirSync, writeFileSync } from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { FolderBlobStore } from '../../src/blobs/folder-blob-store.ts';
import { OffloadedResults } from '../../src/blobs/offloaded-results.ts';
import { AgentDbError } from '../../src/errors.ts';
import { ConcurrentSlots } from '../../src/policy/concurrent-slots.ts';
import { spillDir } from '../../src/sqlite/result-spill.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';
import { pausedGet, readToEnd } from '../helpers/paused-download.ts';
import { signedInCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// A download whose reader takes nothing held its slot for as long as its connection stayed: the
// fair share (session 35, T15) moves slots only towards an even share, so 64 workspaces each with
// one such CSV export (32 for offloaded results) held every slot, and every other workspace was
// refused for as long as they liked (T15's leftover). Now a download whose reader takes nothing for
// DOWNLOAD_STALL_SECONDS is cut off, never made to look whole, and its slot comes back. Here the
// process runs one download at a time: one workspace's reader takes nothing, another's is answered
// once the deadline has passed (on main: RATE_LIMITED for as long as the first stays).

const STALL_S = 1;
/** How long another workspace keeps asking: far past the deadline, whatever the load. */
const ASK_FOR_MS = 30_000;
const held: http.IncomingMessage[] = [];

/** Asks `get` until it answers other than 429 or {@link ASK_FOR_MS} have passed; the statuses seen. */
async function askUntilServed(get: () => Promise<number>): Promise<number[]> {
  const seen: number[] = [];
  const until = Date.now() + ASK_FOR_MS;
  for (;;) {
    const status = await get();
    seen.push(status);
    if (status !== 429 || Date.now() > until) return seen;
    await delay(250);
  }
}

afterAll(() => {
  for (const res of held) res.destroy();
});

describe('CSV exports: a reader that takes nothing', () => {
  let box: Sandbox;
  let web: WebServer;
  let client: AgentDbClient;
  const cookies: Record<string, string> = {};
  const write = (workspace: string, sql: string) =>
    client.call({ workspace, agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
  const exportUrl = (workspace: string) => `${web.url}/data/export.csv?db=${encodeURIComponent(`${workspace}/scout`)}&table=big`;

  beforeAll(async () => {
    box = sandbox({ EXPORTS_PER_MEMBER: '1', EXPORTS_PER_WORKSPACE: '1', EXPORTS_MAX: '1', DOWNLOAD_STALL_SECONDS: String(STALL_S) });
    await box.pool();
    client = box.client();
    web = await startWebServer(box);
    for (const ws of ['stalls', 'other']) {
      cookies[ws] = await signedInCookie(web, ws, 'ada', 'member', '/inbox');
      expect(await write(ws, 'CREATE TABLE big(id INTEGER PRIMARY KEY, note TEXT)')).toMatchObject({ ok: true });
    }
    // About 20 MB of CSV: more than the sockets between a paused reader and the server hold.
    const fill = `INSERT INTO big(note) SELECT printf('%.200c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) SELECT i FROM n)`;
    expect(await write('stalls', fill)).toMatchObject({ ok: true });
    expect(await write('other', "INSERT INTO big(note) VALUES ('small')")).toMatchObject({ ok: true });
  }, 180_000);

  afterAll(async () => {
    await web?.close();
    await box?.cleanup();
  });

  it('cuts the export off after DOWNLOAD_STALL_SECONDS and gives its slot to another workspace', async () => {
    const stalled = await pausedGet(exportUrl('stalls'), { cookie: cookies.stalls!, accept: 'text/html' }, held);
    expect(stalled.statusCode).toBe(200);
    const seen = await askUntilServed(async () => {
      const res = await fetch(exportUrl('other'), { headers: { cookie: cookies.other!, accept: 'text/html' }, signal: AbortSignal.timeout(15_000) });
      const text = await res.text();
      if (res.status === 200) expect(text).toContain('small');
      return res.status;
    });
    expect(seen.at(-1)).toBe(200);
    // The stalled download, read now, stops short: cut off, not a shorter file that looks whole.
    expect(await readToEnd(stalled)).toBe(false);
  }, 60_000);
});

describe('offloaded results: a reader that takes nothing', () => {
  let sb: Sandbox;
  let k: KeyedApp;
  let base: string;
  const keys: Record<string, string> = {};
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    sb = sandbox();
    const store = new FolderBlobStore(path.join(sb.dataDir, 'blobs'));
    // The process's downloads made one, refused as download-slots.ts refuses.
    const one = new ConcurrentSlots({ perCaller: 1, perWorkspace: 1, total: 1 }, () => new AgentDbError('RATE_LIMITED', 'full', { retryAfter: 5 }));
    const results = new OffloadedResults(store, { dataDir: sb.dataDir, ttlS: 3600, downloads: one, stallMs: STALL_S * 1000 });
    k = keyedApp(sb, { results });
    mkdirSync(spillDir(sb.dataDir), { recursive: true });
    for (const ws of ['stalls', 'other']) {
      keys[ws] = await k.agentKey(ws, 'ag', { displayName: 'Ag', settings: { database: 'agent' } });
      const file = path.join(spillDir(sb.dataDir), `${ws}.json`);
      const bytes = ws === 'stalls' ? 16 * 1024 * 1024 : 1000;
      writeFileSync(file, JSON.stringify({ columns: ['s'], rows: [['x'.repeat(bytes - 40)]] }));
      ids[ws] = (await results.keep({ file, bytes, rows: 1 } as never, { workspace: ws, agent: 'ag', callId: `${ws}-1` })).id;
    }
    base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  }, 60_000);

  afterAll(async () => {
    await k?.close();
    await sb?.cleanup();
  });

  it('cuts the download off after the stall deadline and gives its place to another workspace', async () => {
    const stalled = await pausedGet(`${base}/v1/results/${ids.stalls}`, { authorization: `Bearer ${keys.stalls}` }, held);
    expect(stalled.statusCode).toBe(200);
    const seen = await askUntilServed(async () => {
      const res = await fetch(`${base}/v1/results/${ids.other}`, { headers: { authorization: `Bearer ${keys.other}` }, signal: AbortSignal.timeout(15_000) });
      const body = await res.text();
      if (res.status === 200) expect((JSON.parse(body) as { rows: unknown[] }).rows).toHaveLength(1);
      return res.status;
    });
    expect(seen.at(-1)).toBe(200);
    expect(await readToEnd(stalled)).toBe(false);
  }, 60_000);
});
