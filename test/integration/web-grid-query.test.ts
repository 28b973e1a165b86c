import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer } from '../helpers/web-server.ts';

// The grid's query is checked by its route schema like the API's input, but a person reading
// the page gets the page's own error (HTML, the registry's status), not the API's JSON.

let box: Sandbox;
let web: WebServer;
let cookie: string;

beforeAll(async () => {
  box = sandbox();
  web = await startWebServer(box);
  const { key } = await web.members.add('acme', 'ada', 'admin');
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
  await box?.cleanup();
});

it('answers a bad grid query with an error page naming each bad field', async () => {
  const r = await fetch(`${web.url}/data/table?db=acme%2Fscout&table=leads&size=7&dir=up`, { headers: { cookie, accept: 'text/html' }, redirect: 'manual' });
  expect(r.status).toBe(400);
  expect(r.headers.get('content-type')).toMatch(/^text\/html/);
  const page = await r.text();
  expect(page).toContain('INVALID_ARGUMENTS: size: not an offered page size');
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
  expect(await r.text()).toContain('INVALID_ARGUMENTS: the page link is damaged; start from the first page');
});
