import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient, AwaitingAnswer } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer } from '../helpers/web-server.ts';
import { CHROMIUM } from '../helpers/chromium.ts';

// The inbox in Chromium once it is bounded: pending calls 25 a page with older/newer links, the
// live update on the first page and a "new calls arrived" note on an older one, and a call too
// long for its card read whole and approved on its own page (its card has no Approve button).
const WS = 'acme';
const gated = { database: 'agent' as const, approval: 'write' as const };

let box: Sandbox;
let server: WebServer;
let client: AgentDbClient;
let browser: Browser;
let key: string;

const call = (sql: string, settings: object) => client.call({ workspace: WS, agent: 'scout', settings, tool: 'DATA_WRITE_SQL', arguments: { sql } });
async function park(sql: string): Promise<string> {
  const answer = (await client.call(
    { workspace: WS, agent: 'scout', settings: gated, tool: 'DATA_WRITE_SQL', arguments: { sql } },
    { wait: false },
  )) as AwaitingAnswer;
  expect(answer).toMatchObject({ status: 'awaiting_approval' });
  return answer.approval.id;
}
const cards = (page: Page) => page.locator('#pending article[data-approval]');

beforeAll(async () => {
  // The page's own bound is what is tested: calls this large are refused at parking by default (MAX_PARKED_CALL_BYTES).
  box = sandbox({ MAX_PARKED_CALL_BYTES: String(1024 * 1024) });
  await box.pool();
  client = box.client();
  server = await startWebServer(box);
  key = (await server.members.add(WS, 'ada', 'admin')).key;
  browser = await chromium.launch(CHROMIUM);
  expect(await call('CREATE TABLE t(v)', { database: 'agent' })).toMatchObject({ ok: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await box?.cleanup();
});

it('pages pending calls, says on an older page that new ones arrived, and approves a long call only on its own page', { timeout: 90_000 }, async () => {
  for (let i = 1; i <= 26; i++) await park(`INSERT INTO t(v) VALUES (${i})`);
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${server.url}/inbox`);
  await page.getByLabel('Member key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/inbox/);
  expect(await cards(page).count()).toBe(25);
  expect(await page.locator('#pending-pager').textContent()).toContain('1–25 of 26');

  await page.locator('#pending-pager').getByRole('link', { name: 'older →' }).click();
  await page.waitForURL(/p=2/);
  expect(await cards(page).count()).toBe(1);
  expect(await cards(page).locator('pre.sql').textContent()).toBe('INSERT INTO t(v) VALUES (1)');
  await page.locator('#live', { hasText: /^live$/ }).waitFor();

  // A call parked meanwhile is announced here, not pushed into this older page.
  const sql = `INSERT INTO t(v) VALUES ('${'z'.repeat(100 * 1024 - 40)}')`;
  const waiting = call(sql, gated);
  await page.locator('#pending-news', { hasText: '1 new call arrived' }).waitFor();
  await page.locator('#pending-pager', { hasText: 'of 27' }).waitFor();
  expect(await cards(page).count()).toBe(1);

  await page.getByRole('link', { name: 'show the newest' }).click();
  await page.waitForURL(/\/inbox$/);
  expect(await cards(page).count()).toBe(25);
  const card = cards(page).first();
  expect(await card.getAttribute('data-cut')).toBe('true');
  expect(await card.locator('.cut').textContent()).toContain(`cut: ${Buffer.byteLength(sql).toLocaleString('en')} bytes in all`);
  expect((await card.locator('pre.sql').textContent())!.length).toBeLessThanOrEqual(4096);
  expect(await card.getByRole('button', { name: 'Approve' }).count()).toBe(0);
  expect(await card.getByRole('button', { name: 'Reject' }).count()).toBe(1);

  await card.locator('.cut').getByRole('link', { name: 'See it whole' }).click();
  await page.waitForURL(/\/inbox\/ap_/);
  expect(await page.locator('#approval pre.sql').textContent()).toBe(sql);
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.waitForURL(/decided=approved/);
  expect(await waiting).toMatchObject({ ok: true, result: { changes: 1 } });
  await context.close();
});
