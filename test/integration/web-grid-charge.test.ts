import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { signedInCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// Hostile review T3: a page of the Data grid sorts and counts on the database's owner as a query
// does, and was free: a member reloading sorted pages of an unindexed column held an executor at
// no cost to its budget. A page is charged as a lookup (a tenth of a call), refused past the budget.

let box: Sandbox;
let web: WebServer;
let cookie: string;

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  const client = box.client();
  for (const sql of ['CREATE TABLE leads (email TEXT)', "INSERT INTO leads VALUES ('a@x')"])
    expect(await client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } })).toMatchObject(
      {
        ok: true,
      },
    );
  // One call a window for the workspace: ten tenths, ten pages.
  web = await startWebServer(box, { rateLimits: { windowS: 600, workspaceCalls: 1 } });
  cookie = await signedInCookie(web, 'acme', 'ada', 'member');
}, 60_000);

afterAll(async () => {
  await web?.close();
  await box?.cleanup();
});

it('charges each grid page a tenth of a call and refuses pages past the budget with 429 and Retry-After', async () => {
  const statuses: number[] = [];
  let refused: Response | undefined;
  for (let i = 0; i < 12; i++) {
    const r = await fetch(`${web.url}/data/table?db=acme%2Fscout&table=leads&sort=email&dir=desc`, { headers: { cookie, accept: 'text/html' } });
    statuses.push(r.status);
    if (r.status === 429) refused = r;
    else await r.arrayBuffer();
  }
  expect(statuses).toEqual([...Array(10).fill(200), 429, 429]);
  expect(Number(refused!.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(await refused!.text()).toContain('RATE_LIMITED');
});
