import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { signedInCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// The grid's query is checked by its route schema like the API's input, but a person reading
// the page gets the page's own error (HTML, the registry's status), not the API's JSON.

let box: Sandbox;
let web: WebServer;
let cookie: string;

beforeAll(async () => {
  box = sandbox();
  web = await startWebServer(box);
  cookie = await signedInCookie(web, 'acme', 'ada', 'admin');
}, 60_000);

afterAll(async () => {
  await web?.close();
  await box?.cleanup();
});

it('answers a bad grid query with an error page naming each bad field', async () => {
  const r = await fetch(`${web.url}/data/table?db=acme%2Fscout&table=leads&size=7&dir=up`, { headers: { cookie, accept: 'text/html' }, redirect: 'manual' });
  expect(r.status).toBe(400);
  expect(r.headers.get('content-type')).toMatch(/^text\/html/);
  const page = await r.text();
  expect(page).toContain('size: not an offered page size');
  expect(page).toMatch(/dir: Invalid option/);
});

it('signs a stranger out before reading the query', async () => {
  const r = await fetch(`${web.url}/data/table?size=7`, { headers: { accept: 'text/html' }, redirect: 'manual' });
  await r.arrayBuffer();
  expect(r.status).toBe(303);
});

it('answers a damaged page link as such, not as a field of the query', async () => {
  const r = await fetch(`${web.url}/data/table?db=acme%2Fscout&table=leads&after=bm90IGEgY3Vyc29y`, {
    headers: { cookie, accept: 'text/html' },
    redirect: 'manual',
  });
  expect(r.status).toBe(400);
  expect(await r.text()).toContain('The page link is damaged; start from the first page. <small class="code">INVALID_ARGUMENTS</small>');
});

it('shows a table as of a past moment, from history, read-only, and keeps the moment in its links', async () => {
  await box.pool();
  const client = box.client();
  const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
  const write = (sql: string) => client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql } });
  expect((await write('CREATE TABLE leads (id INTEGER PRIMARY KEY, company TEXT)')).ok).toBe(true);
  expect((await write("INSERT INTO leads (company) VALUES ('Acme corp')")).ok).toBe(true);
  const then = new Date().toISOString();
  expect((await write("UPDATE leads SET company = 'Initech'")).ok).toBe(true);
  const page = (q: string) => fetch(`${web.url}/data/table?db=acme%2Fscout&table=leads&${q}`, { headers: { cookie, accept: 'text/html' }, redirect: 'manual' });
  const before = await page(`as_of=${encodeURIComponent(then)}`);
  expect(before.status).toBe(200);
  const html = await before.text();
  expect(html).toContain('id="as-of-note"');
  expect(html).toContain('<td>Acme corp</td>');
  expect(html).not.toContain('Initech');
  // Sorting keeps the moment.
  expect(html).toContain(`as_of=${encodeURIComponent(then)}`);
  const now = await (await page('')).text();
  expect(now).toContain('<td>Initech</td>');
  expect(now).not.toContain('id="as-of-note"');
  expect(html).toMatch(/<form method="get" action="\/data\/table" id="as-of-form"/);
  expect(html).not.toContain('id="drop-form"');
  // Out of range: the page's own error, naming the earliest moment kept.
  const early = await page('as_of=2001-01-01T00:00');
  expect(early.status).toBe(400);
  expect(await early.text()).toMatch(/before the earliest moment kept, \d{4}-.*<small class="code">HISTORY_OUT_OF_RANGE<\/small>/);
  const bad = await page('as_of=tuesday');
  expect(bad.status).toBe(400);
  expect(await bad.text()).toContain('INVALID_ARGUMENTS');
});
