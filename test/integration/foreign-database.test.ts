import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer } from '../helpers/web-server.ts';

// Session 32, A3: another workspace's database was NOT_FOUND to the history (API, web page) and
// NOT_PERMITTED (403) to the data browser (its pages, grid and CSV). One answer now, NOT_FOUND,
// decided by the id alone: the same whether the database exists or not, on every surface.
let sb: Sandbox;
let web: WebServer;
let key: string;
let cookie: string;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  const client = sb.client();
  expect(
    await client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } }),
  ).toMatchObject({ ok: true });
  web = await startWebServer(sb);
  // An admin of another workspace: every page and route is open to them but for the workspace.
  ({ key } = await web.members.add('globex', 'eve', 'admin'));
  const r = await fetch(`${web.url}/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: web.url },
    body: new URLSearchParams({ key, next: '/data' }).toString(),
  });
  expect(r.status).toBe(303);
  cookie = r.headers.get('set-cookie')!.split(';')[0]!;
}, 60_000);
afterAll(async () => {
  await web?.close();
  await sb?.cleanup();
});

/** Status and error code of every surface asked for `db` by the stranger. */
async function answers(db: string): Promise<Record<string, string>> {
  const q = encodeURIComponent(db);
  const out: Record<string, string> = {};
  const page = async (name: string, path: string) => {
    const r = await fetch(`${web.url}${path}`, { headers: { cookie, accept: 'text/html' } });
    const text = await r.text();
    out[name] = `${r.status} ${/NOT_FOUND|NOT_PERMITTED/.exec(text)?.[0]}`;
  };
  const api = async (name: string, path: string, init: RequestInit = {}) => {
    const r = await fetch(`${web.url}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...init.headers } });
    out[name] = `${r.status} ${(await r.json()).error?.code}`;
  };
  await page('web database', `/data/db?db=${q}`);
  await page('web grid', `/data/table?db=${q}&table=t`);
  await page('web CSV', `/data/export.csv?db=${q}&table=t`);
  await page('web history', `/data/history?db=${q}`);
  await api('API history', `/v1/databases/${q}/history`);
  await api('API activity', `/v1/databases/${q}/activity`);
  await api('API restore', `/v1/databases/${q}/restore`, { method: 'POST', body: JSON.stringify({ at: new Date().toISOString(), into: `${db}-copy` }) });
  return out;
}

describe("another workspace's database", () => {
  it('is NOT_FOUND (404) on every surface, alike whether it exists or not', async () => {
    const there = await answers('acme/scout');
    for (const [surface, answer] of Object.entries(there)) expect(answer, surface).toBe('404 NOT_FOUND');
    expect(await answers('acme/ghost')).toEqual(there);
  });
});
