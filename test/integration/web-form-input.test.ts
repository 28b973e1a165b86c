import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { signedInCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// Each web form's input is checked by its route's zod schema, like the API's, but a malformed
// form still answers as the page always did (its status, HTML or its redirect), now saying which
// field was wrong. A malformed form never reaches a core, so no workers are started.

let box: Sandbox;
let web: WebServer;
let cookie: string;
let csrf: string;

const form = (fields: Record<string, string>) => ({
  method: 'POST',
  redirect: 'manual' as const,
  headers: { 'content-type': 'application/x-www-form-urlencoded', origin: web.url, cookie, accept: 'text/html' },
  body: new URLSearchParams(fields).toString(),
});

async function htmlOf(r: Response): Promise<string> {
  expect(r.headers.get('content-type')).toMatch(/^text\/html/);
  return r.text();
}

beforeAll(async () => {
  box = sandbox();
  web = await startWebServer(box);
  cookie = await signedInCookie(web, 'acme', 'ada', 'admin', '/inbox');
  const inbox = await (await fetch(`${web.url}/inbox`, { headers: { cookie, accept: 'text/html' } })).text();
  csrf = /<meta name="csrf-token" content="([^"]+)">/.exec(inbox)![1]!;
}, 60_000);

afterAll(async () => {
  await web?.close();
  await box?.cleanup();
});

it('sign-in without a key is the sign-in page again, 401, asking for the key and keeping where it was going', async () => {
  const r = await fetch(`${web.url}/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: web.url },
    body: new URLSearchParams({ key: '   ', next: '/data' }).toString(),
  });
  expect(r.status).toBe(401);
  expect(r.headers.get('set-cookie')).toBeNull();
  const page = await htmlOf(r);
  expect(page).toContain('key: paste your member key. <small class="code">INVALID_ARGUMENTS</small>');
  expect(page).toContain('name="next" value="/data"');
});

it('a decision that is neither approve nor reject goes back to the inbox with the registry notice', async () => {
  const r = await fetch(`${web.url}/approvals/appr-1/decision`, form({ _csrf: csrf, decision: 'maybe' }));
  expect(r.status).toBe(303);
  expect(r.headers.get('location')).toBe('/inbox?error=INVALID_ARGUMENTS');
  const page = await htmlOf(await fetch(`${web.url}/inbox?error=INVALID_ARGUMENTS`, { headers: { cookie, accept: 'text/html' } }));
  expect(page).toContain('The request or its arguments are not valid. <small class="code">INVALID_ARGUMENTS</small>');
});

it('a drop form without its table is an error page naming the field, and drops nothing', async () => {
  const r = await fetch(`${web.url}/data/drop`, form({ _csrf: csrf, db: 'acme', confirm: 'leads' }));
  expect(r.status).toBe(400);
  expect(await htmlOf(r)).toContain('table: name the table to drop. <small class="code">INVALID_ARGUMENTS</small>');
});

it('a restore form without its database is an error page naming the field', async () => {
  const r = await fetch(`${web.url}/data/history/restore`, form({ _csrf: csrf, at: '2026-01-01T00:00:00' }));
  expect(r.status).toBe(400);
  expect(await htmlOf(r)).toContain('db: name a database (');
});

it('a database page naming two databases is an error page naming the field', async () => {
  const r = await fetch(`${web.url}/data/db?db=acme&db=acme%2Fscout`, { headers: { cookie, accept: 'text/html' }, redirect: 'manual' });
  expect(r.status).toBe(400);
  expect(await htmlOf(r)).toContain('db: name a database (');
});

it('a well-formed form keeps its token through the schema and reaches the handler', async () => {
  // The schema's output replaces the body before the token is read: a schema that dropped
  // `_csrf` would refuse every form as stale.
  const r = await fetch(`${web.url}/data/drop`, form({ _csrf: csrf, db: 'acme', table: 'leads', confirm: 'lead' }));
  expect(r.status).toBe(400);
  expect(await htmlOf(r)).toContain('Type the table name exactly to confirm the drop; nothing was dropped. <small class="code">INVALID_ARGUMENTS</small>');
});

it('a well-formed form with a stale token is still refused before anything runs', async () => {
  const r = await fetch(`${web.url}/data/drop`, form({ _csrf: 'stale', db: 'acme', table: 'leads', confirm: 'leads' }));
  expect(r.status).toBe(403);
  await r.arrayBuffer();
});

it('a restore in place to a time without the database name typed is refused before anything runs', async () => {
  for (const confirm of [undefined, 'acm', 'ACME']) {
    const r = await fetch(`${web.url}/data/history/restore`, form({ _csrf: csrf, db: 'acme', at: '2026-01-01T00:00:00', ...(confirm ? { confirm } : {}) }));
    expect(r.status).toBe(400);
    expect(await htmlOf(r)).toContain(
      'Type the database name (acme) exactly to confirm the restore in place; nothing was restored. <small class="code">INVALID_ARGUMENTS</small>',
    );
  }
});

it('a bulk decision reads ticked ids as a list, one id as a list of one, and none as the registry notice, keeping the filter', async () => {
  const bulk = (fields: [string, string][]) =>
    fetch(`${web.url}/approvals/decide`, { ...form({}), body: new URLSearchParams([['_csrf', csrf], ...fields]).toString() });
  let r = await bulk([
    ['ids', 'ap_gone1'],
    ['ids', 'ap_gone2'],
    ['decision', 'reject'],
    ['agent', 'scout'],
  ]);
  expect(r.status).toBe(303);
  expect(r.headers.get('location')).toBe('/inbox?agent=scout&bulk=rejected&done=0&skipped=2&why=NOT_FOUND');
  r = await bulk([
    ['ids', 'ap_gone1'],
    ['decision', 'approve'],
  ]);
  expect(r.headers.get('location')).toBe('/inbox?bulk=approved&done=0&skipped=1&why=NOT_FOUND');
  r = await bulk([
    ['decision', 'approve'],
    ['tool', 'DATA_WRITE_SQL'],
  ]);
  expect(r.headers.get('location')).toBe('/inbox?tool=DATA_WRITE_SQL&error=INVALID_ARGUMENTS');
  const page = await htmlOf(
    await fetch(`${web.url}/inbox?bulk=rejected&done=0&skipped=2&why=NOT_FOUND,nonsense`, { headers: { cookie, accept: 'text/html' } }),
  );
  expect(page).toContain('Rejected 0 calls; 2 calls not decided (Nothing by that name or id exists. <small class="code">NOT_FOUND</small>)');
  expect(page).not.toContain('nonsense');
});
