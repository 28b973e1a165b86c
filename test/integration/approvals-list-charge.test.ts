import { afterAll, beforeAll, expect, it } from 'vitest';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';
import { approvalRequest } from '../helpers/approval-request.ts';

// Session 31, T8 (a hostile tenant): `GET /v1/approvals` walks up to 5,000 entries of its
// workspace's index to fill a page (a filter that names nothing there walks them all), and was not
// charged at all, where the inbox's page of the same entries is (session 30, T7): a member asking in
// a loop took Redis's one thread from every workspace for free. A page now costs a lookup and a
// call per 1,000 entries it looked at, as the inbox's does; past the rate 429 with Retry-After.
// Reading one approval whole (up to ~1 MB of SQL and params) was free too: now a lookup.

const T0 = Date.now();
const DAY_MS = 24 * 3600 * 1000;
let sb: Sandbox;
let k: KeyedApp;
let base: string;

const request = (id: string, createdAt: number) => approvalRequest({ id, workspace: 'evil', agent: 'spam', createdAt, expiresAt: T0 + 30 * DAY_MS });

beforeAll(async () => {
  sb = sandbox();
  // 20 calls a key in the window: 200 points, of which a page that walked 2,000 entries takes 21.
  k = keyedApp(sb, { rateLimits: { windowS: 600, keyCalls: 20 } });
  const store = new ApprovalStore(k.redis, keysFor(sb.config.prefix));
  await store.pages.pendingByDatabase('evil');
  for (let i = 0; i < 2000; i += 500) {
    const ids = Array.from({ length: 500 }, (_, j) => `ap_l${i + j}`);
    await Promise.all(ids.map((id, j) => store.create(request(id, T0 - DAY_MS + i + j))));
    await Promise.all(ids.map((id) => store.transition(id, 'rejected', 'evil/admin')));
  }
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
}, 120_000);
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

it("a list page is charged by the entries it walked: a member's loop of empty pages is refused with Retry-After", async () => {
  const key = await k.memberKey('evil', 'ada', 'member');
  const statuses: number[] = [];
  let refusal = '';
  for (let i = 0; i < 12; i++) {
    const r = await fetch(`${base}/v1/approvals?state=all&agent=nobody`, { headers: { authorization: `Bearer ${key}` } });
    statuses.push(r.status);
    const body = (await r.json()) as { approvals?: unknown[]; error?: { code: string } };
    if (r.status === 200) expect(body.approvals).toEqual([]);
    else refusal = `${r.headers.get('retry-after')} ${body.error?.code}`;
  }
  expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
  expect(statuses.slice(-2)).toEqual([429, 429]);
  expect(refusal).toMatch(/^\d+ RATE_LIMITED$/);
}, 60_000);

it('reading one approval whole counts a lookup: past the rate 429 with Retry-After', async () => {
  const key = await k.memberKey('evil', 'bob', 'member');
  const statuses: number[] = [];
  // 200 points: 200 reads of a tenth of a call each, then refused.
  for (let i = 0; i < 203; i++) {
    const r = await fetch(`${base}/v1/approvals/ap_l7`, { headers: { authorization: `Bearer ${key}` } });
    statuses.push(r.status);
    await r.arrayBuffer();
  }
  expect(new Set(statuses.slice(0, 200))).toEqual(new Set([200]));
  expect(statuses.slice(200)).toEqual([429, 429, 429]);
}, 60_000);
