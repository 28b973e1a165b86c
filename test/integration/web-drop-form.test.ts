import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { signedInCookie, startWebServer, type WebServer } from '../helpers/web-server.ts';

// The table page offers the drop form only where the drop would be allowed: it asks the access
// rules (policy/access.ts) the drop asks, where it held a copy of them (session 31, H6). No
// behaviour changed: this holds the page to what the rules say.

let box: Sandbox;
let web: WebServer;
const cookies: Record<string, string> = {};

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  web = await startWebServer(box);
  for (const [name, role] of [
    ['ada', 'admin'],
    ['bob', 'member'],
  ] as const) {
    cookies[name] = await signedInCookie(web, 'acme', name, role);
  }
  const client = box.client();
  const settings = { database: 'workspace' as const, sharedData: true };
  for (const scope of ['agent', 'workspace'] as const) {
    const created = await client.call({ workspace: 'acme', agent: 'scout', settings, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)', scope } });
    expect(created.ok).toBe(true);
  }
}, 60_000);
afterAll(async () => {
  await web?.close();
  await box?.cleanup();
});

async function tablePage(who: string, db: string): Promise<string> {
  const r = await fetch(`${web.url}/data/table?db=${encodeURIComponent(db)}&table=t`, { headers: { cookie: cookies[who]!, accept: 'text/html' } });
  expect(r.status).toBe(200);
  return r.text();
}

it("offers an admin the drop of a shared table, a member the rule's words, and nobody an agent's table", async () => {
  expect(await tablePage('ada', 'acme')).toContain('id="drop-form"');
  const member = await tablePage('bob', 'acme');
  expect(member).not.toContain('id="drop-form"');
  expect(member).toContain('Only a workspace admin can drop a shared table.');
  for (const who of ['ada', 'bob']) {
    const page = await tablePage(who, 'acme/scout');
    expect(page).not.toContain('id="drop-form"');
    expect(page).toMatch(/An agent(&#39;|')s tables are dropped only by that agent\./);
  }
});
