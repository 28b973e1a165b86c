import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer } from '../helpers/web-server.ts';

// A signed-in page holds what agents stored and the session's CSRF token. Stored by the browser
// (or a proxy), it outlives the sign-out: on a shared computer the next person presses Back and
// reads the table. Every page behind the sign-in says `Cache-Control: no-store`.

let box: Sandbox;
let web: WebServer;
let client: AgentDbClient;
let cookie: string;

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  client = box.client();
  web = await startWebServer(box);
  const { key } = await web.members.add('acme', 'ada', 'admin');
  const answer = await client.call({
    workspace: 'acme',
    agent: 'scout',
    settings: { database: 'agent' },
    tool: 'DATA_WRITE_SQL',
    arguments: { sql: 'CREATE TABLE leads(email TEXT)' },
  });
  expect(answer).toMatchObject({ ok: true });
  const r = await fetch(`${web.url}/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: web.url },
    body: new URLSearchParams({ key, next: '/inbox' }).toString(),
  });
  expect(r.status).toBe(303);
  cookie = r.headers.get('set-cookie')!.split(';')[0]!;
}, 60_000);

afterAll(async () => {
  await web?.close();
  await box?.cleanup();
});

describe('signed-in pages are never stored', () => {
  it.each([
    '/inbox',
    '/data',
    '/data/db?db=acme%2Fscout',
    '/data/table?db=acme%2Fscout&table=leads',
    '/data/table?db=acme%2Fscout&table=missing',
    '/data/export.csv?db=acme%2Fscout&table=leads',
  ])('%s says Cache-Control: no-store', async (path) => {
    const r = await fetch(`${web.url}${path}`, { headers: { cookie, accept: 'text/html' }, redirect: 'manual' });
    await r.arrayBuffer();
    expect(r.status).toBeLessThan(500);
    expect(r.headers.get('cache-control')).toMatch(/no-store/);
  });

  it('the sign-in page is not stored either, while the script and styles may be', async () => {
    const page = await fetch(`${web.url}/sign-in`);
    await page.arrayBuffer();
    expect(page.headers.get('cache-control')).toMatch(/no-store/);
    const script = await fetch(`${web.url}/assets/app.js`);
    await script.arrayBuffer();
    expect(script.headers.get('cache-control')).toMatch(/max-age=300/);
  });
});
