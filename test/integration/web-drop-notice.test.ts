import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer, keyCookie } from '../helpers/web-server.ts';

// The database page says "Dropped <table>." after the drop form redirects to it. The table's
// name rides in the redirect's query, so anyone could send a member a link whose "notice" is
// their own text, shown in agentdb's own green status line ("Dropped everything. Your key
// leaked: sign in again at …"). The inbox shows only known words for the same reason; here the
// notice is shown only for a drop this session made.

let box: Sandbox;
let web: WebServer;
let client: AgentDbClient;
let cookie: string;

const signIn = (key: string): Promise<string> => keyCookie(web, key, '/inbox');

const page = async (path: string) => (await fetch(`${web.url}${path}`, { headers: { cookie, accept: 'text/html' } })).text();

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  client = box.client();
  web = await startWebServer(box);
  cookie = await signIn((await web.members.add('acme', 'ada', 'admin')).key);
  const shared = { database: 'workspace' as const, sharedData: true };
  const made = await client.call({
    workspace: 'acme',
    agent: 'scout',
    settings: shared,
    tool: 'DATA_WRITE_SQL',
    arguments: { scope: 'workspace', sql: 'CREATE TABLE scratch(a TEXT)' },
  });
  expect(made).toMatchObject({ ok: true });
}, 60_000);

afterAll(async () => {
  await web?.close();
  await box?.cleanup();
});

describe('the "Dropped" notice of the database page', () => {
  it('does not show text that came only from a link', async () => {
    const spoof = 'everything. Your key leaked: sign in again at evil.example';
    const body = await page(`/data/db?db=acme&dropped=${encodeURIComponent(spoof)}`);
    expect(body).toContain('Tables and views');
    expect(body).not.toContain('evil.example');
  });

  it('shows the table a drop of this session removed', async () => {
    const csrf = /<meta name="csrf-token" content="([^"]+)">/.exec(await page('/data/db?db=acme'))![1]!;
    const r = await fetch(`${web.url}/data/drop`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, origin: web.url, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: csrf, db: 'acme', table: 'scratch', confirm: 'scratch' }).toString(),
    });
    expect(r.status).toBe(303);
    const location = r.headers.get('location')!;
    expect(location).toMatch(/dropped=scratch/);
    expect(await page(location)).toContain('Dropped scratch.');
  });
});
