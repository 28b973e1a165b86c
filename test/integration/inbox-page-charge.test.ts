import { afterAll, beforeAll, expect, it } from 'vitest';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer, keyCookie } from '../helpers/web-server.ts';
import { approvalRequest } from '../helpers/approval-request.ts';

// Session 30, T7 (a hostile tenant): an inbox page reads every entry of its workspace's pending and
// decided indexes (to filter, count and offer its choices), and was not charged at all. At 60,000
// decided approvals (what pro's Redis budget holds; a hostile agent parks writes and lets them
// expire) a page cost Redis 148 ms of CPU, so one member reloading 7 times a second took Redis's
// one thread from every workspace. A page now costs a lookup and a call per 1,000 entries it read.

const T0 = Date.now();
const DAY_MS = 24 * 3600 * 1000;
let box: Sandbox;
let web: WebServer;

const request = (id: string, createdAt: number) => approvalRequest({ id, workspace: 'evil', agent: 'spam', createdAt, expiresAt: T0 + 30 * DAY_MS });

beforeAll(async () => {
  box = sandbox();
  // The Data page lists the workspace's databases through their shards' owners.
  await box.pool();
  // 20 calls a key in the window: 200 points, of which a page of 5,000 decided approvals takes 51.
  web = await startWebServer(box, { rateLimits: { windowS: 600, keyCalls: 20 } });
  const store = new ApprovalStore(web.redis, keysFor(box.config.prefix));
  await store.pages.pendingByDatabase('evil');
  for (let i = 0; i < 5000; i += 500) {
    const ids = Array.from({ length: 500 }, (_, k) => `ap_e${i + k}`);
    await Promise.all(ids.map((id, k) => store.create(request(id, T0 - DAY_MS + i + k))));
    await Promise.all(ids.map((id) => store.transition(id, 'rejected', 'evil/admin')));
  }
}, 120_000);
afterAll(async () => {
  await web.close();
  await box.cleanup();
});

const signIn = (key: string): Promise<string> => keyCookie(web, key, '/inbox');

it("reloading a big inbox spends the member's rate: past it the page is refused, saying when to reload", async () => {
  const { key } = await web.members.add('evil', 'ada', 'member');
  const cookie = await signIn(key);
  const statuses: number[] = [];
  let refusal = '';
  for (let i = 0; i < 8; i++) {
    const r = await fetch(`${web.url}/inbox`, { headers: { cookie } });
    statuses.push(r.status);
    const text = await r.text();
    if (r.status === 429) refusal = `${r.headers.get('retry-after')} ${text}`;
  }
  // The first pages are shown (each read 5,000 entries); then the rate is spent.
  expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
  expect(statuses.slice(4)).toEqual([429, 429, 429, 429]);
  expect(refusal).toMatch(/^\d+ .*RATE_LIMITED/s);
}, 60_000);

it("the Data page's count of pending approvals by database is charged the same way", async () => {
  const store = new ApprovalStore(web.redis, keysFor(box.config.prefix));
  for (let i = 0; i < 5000; i += 500) {
    const ids = Array.from({ length: 500 }, (_, k) => `ap_p${i + k}`);
    await Promise.all(ids.map((id, k) => store.create(request(id, T0 - 1000 + i + k))));
  }
  const { key } = await web.members.add('evil', 'bob', 'member');
  const cookie = await signIn(key);
  const statuses: number[] = [];
  for (let i = 0; i < 8; i++) {
    const r = await fetch(`${web.url}/data`, { headers: { cookie } });
    statuses.push(r.status);
    await r.text();
  }
  expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
  expect(statuses.slice(4)).toEqual([429, 429, 429, 429]);
}, 60_000);
