import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer, keyCookie } from '../helpers/web-server.ts';

// The inbox had no size limit: it rendered up to 500 pending cards, each with the whole SQL (up
// to 100 KB) and params (up to ~1 MB, six times that once `"` is escaped), and every open inbox
// fetched it all again on each approval event. One agent allowed to park writes could make its
// workspace's inbox gigabytes. Now: 25 cards a page, SQL and params cut to 4 KB on a card, and
// a cut call is approved only on its own page, where it is shown whole.

let box: Sandbox;
let web: WebServer;
let client: AgentDbClient;
const gated = { database: 'agent' as const, approval: 'write' as const };

/** A signed-in session of `key`: its cookie and CSRF token. */
async function signIn(key: string): Promise<{ cookie: string; csrf: string }> {
  const cookie = await keyCookie(web, key, '/inbox');
  const page = await get('/inbox', cookie);
  const csrf = /<meta name="csrf-token" content="([^"]+)">/.exec(page.text)![1]!;
  return { cookie, csrf };
}

async function get(path: string, cookie: string): Promise<{ status: number; text: string; location: string | null }> {
  const r = await fetch(`${web.url}${path}`, { headers: { cookie, accept: 'text/html' }, redirect: 'manual' });
  return { status: r.status, text: await r.text(), location: r.headers.get('location') };
}

/** Parks one write of `agent` in `workspace` and answers its approval id. */
async function park(workspace: string, agent: string, sql: string, params?: unknown[]): Promise<string> {
  const answer = (await client.call(
    { workspace, agent, settings: gated, tool: 'DATA_WRITE_SQL', arguments: { sql, ...(params ? { params } : {}) } },
    { wait: false },
  )) as AwaitingAnswer;
  expect(answer).toMatchObject({ status: 'awaiting_approval' });
  return answer.approval.id;
}

const cardIds = (text: string) => [...text.matchAll(/<article class="card" id="ap-([^"]+)"/g)].map((m) => m[1]!);

let acme: { cookie: string; csrf: string };
let other: { cookie: string; csrf: string };

beforeAll(async () => {
  // The page's own bound is what is tested: calls this large are refused at parking by default (MAX_PARKED_CALL_BYTES).
  box = sandbox({ MAX_PARKED_CALL_BYTES: String(1024 * 1024) });
  await box.pool();
  client = box.client();
  web = await startWebServer(box);
  acme = await signIn((await web.members.add('acme', 'ada', 'admin')).key);
  other = await signIn((await web.members.add('globex', 'gus', 'admin')).key);
}, 60_000);

afterAll(async () => {
  await web?.close();
  await box?.cleanup();
});

describe('the approvals inbox stays a bounded size', { timeout: 120_000 }, () => {
  it('shows 60 pending calls 25 a page, newest first, every one reachable once', async () => {
    const parked: string[] = [];
    for (let i = 1; i <= 60; i++) parked.push(await park('acme', 'scout', `INSERT INTO t(v) VALUES (${i})`));
    const first = await get('/inbox', acme.cookie);
    expect(cardIds(first.text)).toHaveLength(25);
    expect(first.text).toContain('1–25 of 60 · page 1 of 3');
    expect(first.text).toContain('href="/inbox?p=2" rel="next"');
    const second = await get('/inbox?p=2', acme.cookie);
    const third = await get('/inbox?p=3', acme.cookie);
    expect(cardIds(second.text)).toHaveLength(25);
    expect(cardIds(third.text)).toHaveLength(10);
    expect(second.text).toContain('href="/inbox" rel="prev"');
    const shown = [...cardIds(first.text), ...cardIds(second.text), ...cardIds(third.text)];
    expect(new Set(shown)).toEqual(new Set(parked));
    // Newest first: parked one after another, so each page's creation times only go down.
    const store = new ApprovalStore(web.redis, keysFor(box.config.prefix));
    const created = await Promise.all(shown.map(async (id) => (await store.get(id))!.createdAt));
    expect(created).toEqual([...created].sort((a, b) => b - a));
    // A page past the last shows the last.
    expect(cardIds((await get('/inbox?p=9', acme.cookie)).text)).toEqual(cardIds(third.text));
  });

  it('keeps the page bounded however big the parked calls are', async () => {
    const sql = `INSERT INTO t(v) VALUES ('${'x'.repeat(100 * 1024 - 40)}')`;
    const params = ['"'.repeat(200_000)];
    for (let i = 0; i < 27; i++) await park('bulk', `agent${i % 3}`, `${sql.slice(0, -2)}${i}')`, params);
    const { key } = await web.members.add('bulk', 'bea', 'member');
    const bea = await signIn(key);
    const page = await get('/inbox', bea.cookie);
    // Whole, these 27 cards were some 40 MB of HTML.
    expect(page.text.length).toBeLessThan(1_000_000);
    expect(cardIds(page.text)).toHaveLength(25);
    expect(page.text).toContain('cut: 102,');
    expect(page.text).not.toContain('>Approve</button>');
  });

  it('cuts a 100 KB statement on its card, without an Approve button, and shows and approves it whole on its own page', async () => {
    const sql = `INSERT INTO t(v) VALUES ('${'y'.repeat(100 * 1024 - 40)}')`;
    const bytes = Buffer.byteLength(sql);
    const id = await park('solo', 'scout', sql);
    const { key } = await web.members.add('solo', 'sam', 'admin');
    const sam = await signIn(key);
    const inbox = await get('/inbox', sam.cookie);
    const card = inbox.text.slice(inbox.text.indexOf(`id="ap-${id}"`), inbox.text.indexOf('</article>'));
    expect(card).toContain(`cut: ${bytes.toLocaleString('en')} bytes in all`);
    expect(card).toContain(`href="/inbox/${id}"`);
    expect(card).not.toContain('value="approve"');
    expect(card).toContain('value="reject"');
    expect(card.length).toBeLessThan(12_000);

    const own = await get(`/inbox/${id}`, sam.cookie);
    expect(own.status).toBe(200);
    // Whole, quotes escaped like any text (a failing toContain would print 100 KB twice).
    expect(own.text.includes(`&#39;${'y'.repeat(100 * 1024 - 40)}&#39;`)).toBe(true);
    expect(own.text).toContain('value="approve"');
    expect(own.text).toContain('name="whole" value="1"');

    // Approving without having had it whole (a card from before, a hand-made form) sends the person to read it.
    const post = (fields: Record<string, string>) =>
      fetch(`${web.url}/approvals/${id}/decision`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie: sam.cookie, 'content-type': 'application/x-www-form-urlencoded', origin: web.url },
        body: new URLSearchParams({ _csrf: sam.csrf, decision: 'approve', ...fields }).toString(),
      });
    const blind = await post({});
    expect(blind.status).toBe(303);
    expect(blind.headers.get('location')).toBe(`/inbox/${id}?whole=needed`);
    expect((await get(`/inbox/${id}?whole=needed`, sam.cookie)).text).toContain('read it whole here before approving it');
    const seen = await post({ whole: '1' });
    expect(seen.headers.get('location')).toBe('/inbox?decided=approved');
    // Its notice does not promise a run: a call whose data changed since it was asked is asked again.
    const notice = (await get('/inbox?decided=approved', sam.cookie)).text;
    expect(notice).toContain('Approved: the call runs, unless its data changed since it was asked; then it is asked again as a new card.');
    const decided = await get(`/inbox/${id}`, sam.cookie);
    expect(decided.text).toContain('<dt>decided by</dt><dd>sam</dd>');
  });

  it("answers another workspace's approval id with the same 404 as a missing one", async () => {
    const id = await park('acme', 'scout', 'INSERT INTO t(v) VALUES (-1)');
    expect((await get(`/inbox/${id}`, acme.cookie)).status).toBe(200);
    const foreign = await get(`/inbox/${id}`, other.cookie);
    const missing = await get(`/inbox/ap_${'0'.repeat(24)}`, other.cookie);
    expect(foreign.status).toBe(404);
    expect(missing.status).toBe(404);
    expect(foreign.text).not.toContain('INSERT INTO t');
    expect(foreign.text.replace(id, 'ID')).toBe(missing.text.replace(`ap_${'0'.repeat(24)}`, 'ID'));
  });
});
