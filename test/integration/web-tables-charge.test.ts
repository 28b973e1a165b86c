import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer } from '../helpers/web-server.ts';

// Hostile review T4: a database's tables page (/data/db) counts every row of every table on the
// database's owner, as DATA_DESCRIBE_SCHEMA does, and was free once the grid's pages were charged:
// a member reloading it held an executor at no cost to its budget. It is charged as a grid page is.

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
  // One call a window for the workspace: ten tenths, ten views.
  web = await startWebServer(box, { rateLimits: { windowS: 600, workspaceCalls: 1 } });
  const { key } = await web.members.add('acme', 'ada', 'member');
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

it("charges each view of a database's tables a tenth of a call and refuses views past the budget with 429 and Retry-After", async () => {
  const statuses: number[] = [];
  let refused: Response | undefined;
  for (let i = 0; i < 12; i++) {
    const r = await fetch(`${web.url}/data/db?db=acme%2Fscout`, { headers: { cookie, accept: 'text/html' } });
    statuses.push(r.status);
    if (r.status === 429) refused = r;
    else await r.arrayBuffer();
  }
  expect(statuses).toEqual([...Array(10).fill(200), 429, 429]);
  expect(Number(refused!.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(await refused!.text()).toContain('RATE_LIMITED');
});
