import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer } from '../helpers/web-server.ts';
import { CHROMIUM } from '../helpers/chromium.ts';

// Issue 29 part 5 in Chromium: the inbox filtered by agent (and by database, from the Data
// page), several calls approved with one reason, each on its own (one decided meanwhile by
// someone else says so, the rest run), the Decided list in decision order, and the Data page's
// figures of each database.
const WS = 'acme';
const gated = { database: 'agent' as const, approval: 'write' as const };

let box: Sandbox;
let server: WebServer;
let client: AgentDbClient;
let browser: Browser;
let ada: string;
let bob: string;

const write = (agent: string, sql: string, settings: object = { database: 'agent' }) =>
  client.call({ workspace: WS, agent, settings, tool: 'DATA_WRITE_SQL', arguments: { sql } });
async function park(agent: string, sql: string): Promise<string> {
  const answer = (await client.call({ workspace: WS, agent, settings: gated, tool: 'DATA_WRITE_SQL', arguments: { sql } }, { wait: false })) as AwaitingAnswer;
  expect(answer).toMatchObject({ status: 'awaiting_approval' });
  return answer.approval.id;
}
const api = (path: string, init: RequestInit = {}, key = ada) =>
  fetch(`${server.url}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } }).then(
    (r) => r.json() as Promise<Record<string, unknown>>,
  );
const approval = async (id: string) =>
  (await api(`/v1/approvals/${id}`)).approval as { state: string; decidedBy?: string; reason?: string; ran?: { ok: boolean } };

async function signIn(context: BrowserContext, key: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${server.url}/inbox`);
  await page.getByLabel('Member key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/inbox/);
  return page;
}
const cards = (page: Page) => page.locator('#pending article[data-approval]');

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  client = box.client();
  server = await startWebServer(box);
  ada = (await server.members.add(WS, 'ada', 'admin')).key;
  bob = (await server.members.add(WS, 'bob', 'member')).key;
  browser = await chromium.launch(CHROMIUM);
  for (const agent of ['scout', 'miner']) expect(await write(agent, 'CREATE TABLE t(v)')).toMatchObject({ ok: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await box?.cleanup();
});

it('filters by agent, approves the ticked calls with one reason, each on its own, and lists the decisions newest first', { timeout: 90_000 }, async () => {
  const scout = [
    await park('scout', 'INSERT INTO t VALUES (1)'),
    await park('scout', 'INSERT INTO t VALUES (2)'),
    await park('scout', 'INSERT INTO t VALUES (3)'),
  ];
  const miner = [await park('miner', 'INSERT INTO t VALUES (4)'), await park('miner', 'INSERT INTO t VALUES (5)')];
  const context = await browser.newContext();
  // No live updates on this page: it stays as a person saw it while someone else decided one of
  // its calls, so the batch meets that decision at the server, as it would in the moment before
  // the update arrives.
  await context.route('**/inbox/events', (route) => route.abort());
  const page = await signIn(context, ada);
  expect(await cards(page).count()).toBe(5);
  const bulkApprove = page.getByRole('button', { name: 'Approve selected' });
  expect(await bulkApprove.isDisabled()).toBe(true);

  await page.locator('#inbox-filter').getByLabel('Agent').selectOption('scout');
  await page.locator('#inbox-filter').getByRole('button', { name: 'Filter' }).click();
  await page.waitForURL(/agent=scout/);
  expect((await cards(page).evaluateAll((els) => els.map((e) => e.getAttribute('data-approval')))).sort()).toEqual([...scout].sort());
  expect(await page.locator('#inbox-filter').getByLabel('Agent').inputValue()).toBe('scout');

  await page.locator('#select-all').check();
  expect(await page.locator('#selected-count').textContent()).toBe('3 selected');
  expect(await bulkApprove.isDisabled()).toBe(false);

  // Bob rejects the second one through the API meanwhile.
  expect(
    await api(`/v1/approvals/${scout[1]}/decision`, { method: 'POST', body: JSON.stringify({ decision: 'reject', reason: 'not this one' }) }, bob),
  ).toMatchObject({
    approval: { state: 'rejected' },
  });

  await page.locator('#bulk').getByLabel('Reason for all').fill('checked the batch');
  await bulkApprove.click();
  await page.waitForURL(/bulk=approved/);
  const url = new URL(page.url());
  expect(Object.fromEntries(url.searchParams)).toEqual({ agent: 'scout', bulk: 'approved', done: '2', skipped: '1', why: 'APPROVAL_CONFLICT' });
  expect(await page.locator('main .flash').textContent()).toContain(
    'Approved 2 calls; 1 call not decided (This approval was already decided; the first decision stands. APPROVAL_CONFLICT).',
  );

  for (const id of [scout[0]!, scout[2]!]) {
    await expect
      .poll(() => approval(id), { timeout: 20_000 })
      .toMatchObject({ state: 'approved', decidedBy: 'ada', reason: 'checked the batch', ran: { ok: true } });
  }
  expect(await approval(scout[1]!)).toMatchObject({ state: 'rejected', decidedBy: 'bob' });
  for (const id of miner) expect(await approval(id)).toMatchObject({ state: 'pending' });

  // Decided, still filtered to scout, newest decision first: ada's two after bob's one.
  const rows = page.locator('#decided tbody tr');
  expect(await rows.count()).toBe(3);
  expect(await rows.nth(0).textContent()).toContain('ada');
  expect(await rows.nth(1).textContent()).toContain('ada');
  expect(await rows.nth(2).getAttribute('data-approval')).toBe(scout[1]);
  expect(await cards(page).count()).toBe(0);

  await page.locator('#clear-filter').click();
  await page.waitForURL(/\/inbox$/);
  expect(await cards(page).count()).toBe(2);
  // Rejected together, these two clear the inbox.
  await page.locator('#select-all').check();
  await page.locator('#bulk').getByRole('button', { name: 'Reject selected' }).click();
  await page.waitForURL(/bulk=rejected&done=2&skipped=0/);
  expect(await cards(page).count()).toBe(0);
  for (const id of miner) expect(await approval(id)).toMatchObject({ state: 'rejected', decidedBy: 'ada' });
  await context.close();
});

it("shows each database's size, tables, rows, last write and approvals waiting, linked to the inbox filtered to it", { timeout: 60_000 }, async () => {
  expect(await write('scout', 'CREATE TABLE notes(n)')).toMatchObject({ ok: true });
  expect(await write('scout', 'INSERT INTO notes VALUES (1), (2), (3), (4)')).toMatchObject({ ok: true });
  const waiting = await park('scout', 'INSERT INTO notes VALUES (5)');
  const context = await browser.newContext();
  const page = await signIn(context, bob);
  await page.goto(`${server.url}/data`);
  const row = page.locator('#databases tr[data-db="acme/scout"]');
  // t holds the two values approved above; notes four.
  expect(await row.locator('td.tables').textContent()).toBe('2');
  expect(await row.locator('td.rows').textContent()).toBe('6');
  expect(await row.locator('td.size').textContent()).toMatch(/^\d+(\.\d)? (KB|MB)$/);
  expect(await row.locator('td.last-write time').getAttribute('datetime')).toMatch(/^\d{4}-\d\d-\d\dT/);
  expect(await row.locator('td.pending').textContent()).toBe('1');
  const miner = page.locator('#databases tr[data-db="acme/miner"]');
  expect(await miner.locator('td.rows').textContent()).toBe('0');
  expect(await miner.locator('td.pending').textContent()).toBe('0');
  const shared = page.locator('#databases tr[data-db="acme"]');
  expect(await shared.locator('td.last-write').textContent()).toBe('never');

  await row.locator('td.pending a').click();
  await page.waitForURL(/database=acme%2Fscout/);
  expect(await cards(page).evaluateAll((els) => els.map((e) => e.getAttribute('data-approval')))).toEqual([waiting]);
  expect(await page.locator('#inbox-filter').getByLabel('Database').inputValue()).toBe('acme/scout');
  await api('/v1/approvals/decide', { method: 'POST', body: JSON.stringify({ ids: [waiting], decision: 'reject' }) });
  await context.close();
});

it('leaves out of a bulk approval a call too long to show on its card, which is approved only on its own page', { timeout: 60_000 }, async () => {
  const long = await park('miner', `INSERT INTO t VALUES (6) /* ${'x'.repeat(5000)} */`);
  const short = await park('miner', 'INSERT INTO t VALUES (7)');
  const context = await browser.newContext();
  const page = await signIn(context, ada);
  expect(await page.locator(`#ap-${long}`).getAttribute('data-cut')).toBe('true');
  await page.locator('#select-all').check();
  expect(await page.locator('#selected-count').textContent()).toBe('2 selected');
  await page.getByRole('button', { name: 'Approve selected' }).click();
  await page.waitForURL(/bulk=approved/);
  expect(Object.fromEntries(new URL(page.url()).searchParams)).toEqual({ bulk: 'approved', done: '1', skipped: '1', why: 'whole' });
  expect(await page.locator('main .flash').textContent()).toContain('too long to approve from its card: read it whole on its own page');
  expect(await approval(short)).toMatchObject({ state: 'approved' });
  expect(await approval(long)).toMatchObject({ state: 'pending' });
  await api('/v1/approvals/decide', { method: 'POST', body: JSON.stringify({ ids: [long], decision: 'reject' }) });
  await context.close();
});
