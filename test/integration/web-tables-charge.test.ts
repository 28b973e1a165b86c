import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer, signedInCookie } from '../helpers/web-server.ts';

// Hostile review T4: a database's tables page (/data/db) counts every row of every table on the
// database's owner, as DATA_DESCRIBE_SCHEMA does, and a CSV export reads the whole table there;
// both were free once the grid's pages were charged: a member reloading one or exporting back to
// back held an executor at no cost to its budget. Each is charged as a grid page is.

let box: Sandbox;
let web: WebServer;
let cookie: string;
/** A member of another workspace, whose budget the exports spend. */
let exporter: string;

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  const client = box.client();
  for (const sql of ['CREATE TABLE leads (email TEXT)', "INSERT INTO leads VALUES ('a@x')"])
    for (const workspace of ['acme', 'beta'])
      expect(await client.call({ workspace, agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } })).toMatchObject({
        ok: true,
      });
  // One call a window for the workspace: ten tenths, ten views.
  web = await startWebServer(box, { rateLimits: { windowS: 600, workspaceCalls: 1 } });
  cookie = await signIn('acme', 'ada');
  exporter = await signIn('beta', 'bo');
}, 60_000);

const signIn = (workspace: string, name: string): Promise<string> => signedInCookie(web, workspace, name, 'member');

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

it('charges each CSV export a tenth of a call as it starts and refuses exports past the budget with 429', async () => {
  const statuses: number[] = [];
  let refused: Response | undefined;
  for (let i = 0; i < 11; i++) {
    const r = await fetch(`${web.url}/data/export.csv?db=beta%2Fscout&table=leads`, { headers: { cookie: exporter } });
    statuses.push(r.status);
    if (r.status === 429) refused = r;
    else await r.arrayBuffer();
  }
  expect(statuses).toEqual([...Array(10).fill(200), 429]);
  expect(Number(refused!.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(await refused!.text()).toContain('RATE_LIMITED');
});
