import { afterAll, beforeAll, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { WorkspaceRegistry } from '../../src/registry/workspaces.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer, keyCookie } from '../helpers/web-server.ts';

// Session 30, T7 left it, session 31, T8 closed it: the Data page's list counts each database's
// figures (size, tables, rows) on its owner, one shard op each, and charged only the list's own
// tenth of a call: a workspace of many databases ran that many shard ops a view (every 30 s, as
// long as the figures are kept) for nothing. Each database counted anew now costs a lookup's
// tenth of a call; past the rate the list shows without them, saying why.

let box: Sandbox;
let web: WebServer;

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  // 2 calls a key in the window: 20 points.
  web = await startWebServer(box, { rateLimits: { windowS: 600, keyCalls: 2 } });
  const agents = new AgentRegistry(web.redis, keysFor(box.config.prefix));
  for (const ws of ['many', 'few']) await new WorkspaceRegistry(web.redis, keysFor(box.config.prefix)).put(ws, 'pro');
  // 30 agents: with the shared one, 31 databases, 31 points of figures.
  for (let i = 0; i < 30; i++) await agents.put('many', `a${String(i).padStart(2, '0')}`, { displayName: `A${i}`, settings: { database: 'agent' } });
  for (let i = 0; i < 2; i++) await agents.put('few', `b${i}`, { displayName: `B${i}`, settings: { database: 'agent' } });
}, 60_000);
afterAll(async () => {
  await web.close();
  await box.cleanup();
});

const signIn = (key: string): Promise<string> => keyCookie(web, key, '/data');

/** The Data page's rows' size cells, and the page's text. */
async function dataPage(cookie: string): Promise<{ status: number; text: string; sizes: string[] }> {
  const r = await fetch(`${web.url}/data`, { headers: { cookie } });
  const text = await r.text();
  return { status: r.status, text, sizes: [...text.matchAll(/<td class="size">(.*?)<\/td>/g)].map((m) => m[1]!) };
}

it("charges each database's figures: past the member's rate the list shows without them and says why", async () => {
  const { key } = await web.members.add('many', 'ada', 'member');
  const page = await dataPage(await signIn(key));
  // The list itself (a tenth of a call) is shown; its 31 databases' figures would cost 31 tenths of 20.
  expect(page.status).toBe(200);
  expect(page.sizes).toHaveLength(31);
  expect(page.text).toMatch(/reload in \d+ s for them\. <small class="code">RATE_LIMITED<\/small>/);
  expect(page.sizes.every((s) => s.includes('—'))).toBe(true);
});

it('a workspace of a few databases sees its figures, and the figures kept are not charged again', async () => {
  const { key } = await web.members.add('few', 'bob', 'member');
  const cookie = await signIn(key);
  // 3 databases: 1 + 3 points the first view, 1 each after it while the figures are kept (30 s).
  for (let i = 0; i < 12; i++) {
    const page = await dataPage(cookie);
    expect(page.status).toBe(200);
    expect(page.text).not.toMatch(/RATE_LIMITED/);
    expect(page.sizes.filter((s) => !s.includes('—'))).toHaveLength(3);
  }
});
