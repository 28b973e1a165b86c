import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { signedInCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// Session 32, A3: the web page showed a refusal as `CODE: detail`, raw; and a route that did not
// word its own refusal (a bad form or link) answered the API's JSON to the browser. Now every web
// error path shows a sentence with the code as a small reference, escaped, on the error page.
let sb: Sandbox;
let web: WebServer;
let cookie: string;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  expect(
    await sb
      .client()
      .call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } }),
  ).toMatchObject({ ok: true });
  web = await startWebServer(sb);
  cookie = await signedInCookie(web, 'acme', 'bea', 'member');
}, 60_000);
afterAll(async () => {
  await web?.close();
  await sb?.cleanup();
});

const page = (path: string, init: RequestInit = {}) =>
  fetch(`${web.url}${path}`, { redirect: 'manual', ...init, headers: { cookie, accept: 'text/html', ...init.headers } });

describe('the web error page', () => {
  it('reads as a sentence, the code a small reference after it, what a caller wrote escaped', async () => {
    const r = await page(`/data/table?db=acme%2Fscout&table=${encodeURIComponent('<b>gone</b>')}`);
    expect(r.status).toBe(404);
    const text = await r.text();
    expect(text).toContain('There is no table or view named &quot;&lt;b&gt;gone&lt;/b&gt;&quot;. <small class="code">NOT_FOUND</small>');
    expect(text).not.toContain('NOT_FOUND:');
    expect(text).not.toContain('<b>gone');
  });

  it("words the inbox's refusal notices the same way", async () => {
    const text = await (await page('/inbox?error=NOT_PERMITTED')).text();
    expect(text).toContain('This caller may not do that. <small class="code">NOT_PERMITTED</small>');
  });

  it('is what a form refused before its handler (a bad id) shows, not the API JSON', async () => {
    const apps = await (await page('/apps')).text();
    const csrf = /<meta name="csrf-token" content="([^"]+)">/.exec(apps)![1]!;
    const r = await page(`/apps/${'x'.repeat(65)}/revoke`, {
      method: 'POST',
      headers: { origin: web.url, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: csrf }).toString(),
    });
    expect(r.status).toBe(400);
    expect(r.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await r.text()).toContain('<small class="code">INVALID_ARGUMENTS</small>');
  });
});
