import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { pausedGet, readToEnd } from '../helpers/paused-download.ts';
import { signedInCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// The process's CSV export slots (EXPORTS_MAX) are shared by every workspace. Eight workspaces
// whose clients read nothing held all 64 (8 each) for as long as they liked, and every other
// workspace's export was refused (session 35, T14's leftover). Now, with the process full, a
// workspace's export takes back the oldest of one holding at least two more: here two workspaces
// hold both slots each of a total of 4, and a third's export starts, ending one of theirs.

let box: Sandbox;
let web: WebServer;
let client: AgentDbClient;
const cookies: Record<string, string> = {};
const open: http.IncomingMessage[] = [];

/** One export's answer, its body unread (paused): the download stays under way until read or dropped. */
const startExport = (workspace: string, table: string) =>
  pausedGet(
    `${web.url}/data/export.csv?db=${encodeURIComponent(`${workspace}/scout`)}&table=${table}`,
    { cookie: cookies[workspace]!, accept: 'text/html' },
    open,
  );

const write = (workspace: string, sql: string) =>
  client.call({ workspace, agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });

beforeAll(async () => {
  box = sandbox({ EXPORTS_PER_MEMBER: '2', EXPORTS_PER_WORKSPACE: '2', EXPORTS_MAX: '4' });
  await box.pool();
  client = box.client();
  web = await startWebServer(box);
  for (const ws of ['slowa', 'slowb', 'third']) {
    cookies[ws] = await signedInCookie(web, ws, 'ada', 'member', '/inbox');
    expect(await write(ws, 'CREATE TABLE big(id INTEGER PRIMARY KEY, note TEXT)')).toMatchObject({ ok: true });
  }
  // About 20 MB of CSV each: more than the sockets between a paused reader and the server hold,
  // so an unread download stays under way.
  const fill = `INSERT INTO big(note) SELECT printf('%.200c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) SELECT i FROM n)`;
  for (const ws of ['slowa', 'slowb']) expect(await write(ws, fill)).toMatchObject({ ok: true });
  expect(await write('third', "INSERT INTO big(note) VALUES ('small')")).toMatchObject({ ok: true });
}, 180_000);

afterAll(async () => {
  for (const res of open) res.destroy();
  await web?.close();
  await box?.cleanup();
});

describe('CSV export slots shared between workspaces', () => {
  it('starts a third workspace’s export while two whose readers take nothing hold every slot, ending the oldest of theirs', async () => {
    const slow: http.IncomingMessage[] = [];
    for (const ws of ['slowa', 'slowa', 'slowb', 'slowb']) slow.push(await startExport(ws, 'big'));
    expect(slow.map((r) => r.statusCode)).toEqual([200, 200, 200, 200]);

    const third = await startExport('third', 'big');
    expect(third.statusCode).toBe(200);
    third.resume();
    // The oldest download of a workspace holding the most was ended by the server: read now, it
    // stops short, its file cut off (a socket not read sees no end, so the reader reads it here).
    expect(await readToEnd(slow[0]!)).toBe(false);
  }, 60_000);
});
