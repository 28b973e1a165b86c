import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { pausedGet } from '../helpers/paused-download.ts';
import { signedInCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// Each web-page CSV export holds up to three chunks of up to 2 MiB in the HTTP process while it
// downloads; in review R1 30 at once from one member took that process from 357 to 450 MB, and one
// address may hold 256 connections. Exports at once are bounded per member, per workspace and in
// all (here 2 and 3); past one, the page says so with RATE_LIMITED and 429, and a slot comes back
// however an export ends, a download whose client went away included.

let box: Sandbox;
let web: WebServer;
let client: AgentDbClient;
const cookies: Record<string, string> = {};
const open: http.IncomingMessage[] = [];

/** One export's answer, its body unread (paused): the download stays under way until read or dropped. */
function startExport(who: string, table = 'big'): Promise<http.IncomingMessage> {
  return pausedGet(`${web.url}/data/export.csv?db=acme%2Fscout&table=${table}`, { cookie: cookies[who]!, accept: 'text/html' }, open);
}

/** The whole body of a (refused) answer. */
async function text(res: http.IncomingMessage): Promise<string> {
  res.setEncoding('utf8');
  let body = '';
  for await (const chunk of res) body += chunk;
  return body;
}

async function signIn(name: string): Promise<void> {
  cookies[name] = await signedInCookie(web, 'acme', name, 'member', '/inbox');
}

beforeAll(async () => {
  box = sandbox({ EXPORTS_PER_MEMBER: '2', EXPORTS_PER_WORKSPACE: '3' });
  await box.pool();
  client = box.client();
  web = await startWebServer(box);
  await signIn('ada');
  await signIn('bob');
  const write = (sql: string) =>
    client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
  expect(await write('CREATE TABLE big(id INTEGER PRIMARY KEY, note TEXT)')).toMatchObject({ ok: true });
  // About 40 MB of CSV: more than the sockets between a paused reader and the server hold, so an
  // unread download stays under way.
  const fill = `INSERT INTO big(note) SELECT printf('%.200c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000) SELECT i FROM n)`;
  expect(await write(fill)).toMatchObject({ ok: true });
}, 120_000);

afterAll(async () => {
  for (const res of open) res.destroy();
  await web?.close();
  await box?.cleanup();
});

describe('CSV exports at once', () => {
  it('gives the slot back when the export fails on its owner (no such table)', async () => {
    for (let i = 0; i < 3; i++) {
      const missing = await startExport('ada', 'missing');
      expect(missing.statusCode).toBe(404);
      expect(await text(missing)).toContain('NOT_FOUND');
    }
  });

  it('refuses one past the member’s and the workspace’s bound, and takes new ones once earlier ones end', async () => {
    const [first, second] = [await startExport('ada'), await startExport('ada')];
    expect([first.statusCode, second.statusCode]).toEqual([200, 200]);

    const mine = await startExport('ada');
    expect(mine.statusCode).toBe(429);
    expect(mine.headers['retry-after']).toBe('5');
    const page = await text(mine);
    expect(page).toContain('RATE_LIMITED');
    expect(page).toContain('You already have 2 CSV downloads under way');

    // Another member has room of their own, up to the workspace's bound.
    const bobs = await startExport('bob');
    expect(bobs.statusCode).toBe(200);
    const ours = await startExport('bob');
    expect(ours.statusCode).toBe(429);
    expect(await text(ours)).toContain('Your workspace already has 3 CSV downloads under way');

    // A client that goes away mid-download gives its slot back.
    first.destroy();
    const third = await vi.waitFor(
      async () => {
        const res = await startExport('ada');
        if (res.statusCode !== 200) {
          res.destroy();
          throw new Error(`still refused: ${res.statusCode}`);
        }
        return res;
      },
      { timeout: 20_000, interval: 100 },
    );
    expect(third.statusCode).toBe(200);

    // A download read to its end gives its slot back too.
    second.resume();
    await new Promise((resolve) => second.once('end', resolve));
    const fourth = await vi.waitFor(
      async () => {
        const res = await startExport('ada');
        if (res.statusCode !== 200) {
          res.destroy();
          throw new Error(`still refused: ${res.statusCode}`);
        }
        return res;
      },
      { timeout: 20_000, interval: 100 },
    );
    expect(fourth.statusCode).toBe(200);
  }, 120_000);
});
