import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { signedInCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// The history page's dry run lists what a restore would take away from a page of the activity
// list, then shows the history page (another page of it). Only the page shown was charged, after
// the dry run had run: a member whose budget was spent still had the worker plan the restore and
// read the list on every submit, shown an error page after (review R1). The dry run is charged
// before it runs, as the API's is: a dry run spends 15 calls (it plans the restore) and a tenth
// for the page, and past the budget it is refused without running.

let box: Sandbox;
let web: WebServer;
let cookie: string;
// A moment after the writes, within the history (the form takes an ISO time with its Z as it is).
let moment = '';

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  const client = box.client();
  for (const sql of ['CREATE TABLE leads (email TEXT)', "INSERT INTO leads VALUES ('a@x')", "INSERT INTO leads VALUES ('b@x')"])
    expect(await client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } })).toMatchObject(
      { ok: true },
    );
  moment = new Date().toISOString();
  // 40 calls a window for the workspace: a dry run counts 15 (it plans the restore), and the page shown after it a tenth.
  web = await startWebServer(box, { rateLimits: { windowS: 600, workspaceCalls: 40 } });
  cookie = await signedInCookie(web, 'acme', 'ada', 'admin', '/inbox');
}, 60_000);

afterAll(async () => {
  await web?.close();
  await box?.cleanup();
});

it('charges a dry run of the history page before it runs, and refuses it past the budget', async () => {
  // The history page itself: a tenth.
  const first = await fetch(`${web.url}/data/history?db=acme%2Fscout`, { headers: { cookie, accept: 'text/html' } });
  expect(first.status).toBe(200);
  const csrf = /<meta name="csrf-token" content="([^"]+)">/.exec(await first.text())![1]!;
  const dryRun = async () => {
    const r = await fetch(`${web.url}/data/history/dry-run`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, origin: web.url, accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: csrf, db: 'acme/scout', at: moment }).toString(),
    });
    const page = await r.text();
    return r.status === 200 && page.includes('Dry run') ? 'shown' : page.includes('RATE_LIMITED') ? 'refused' : `${r.status}`;
  };
  const outcomes: string[] = [];
  for (let i = 0; i < 4; i++) outcomes.push(await dryRun());
  // 399 tenths left: two dry runs of 151 tenths each are shown; the third is refused before it
  // runs, by its own charge (97 left), not by the page after it. Charged a tenth as a page of
  // activity, a dry run (which plans the whole restore on the shard) was looped at 26-41 a second
  // by one member, another workspace's reads there five times slower (session 34, T12).
  expect(outcomes).toEqual(['shown', 'shown', 'refused', 'refused']);
});
