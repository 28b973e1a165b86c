import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer } from '../helpers/web-server.ts';
import { CHROMIUM } from '../helpers/chromium.ts';

// An approval card shows what the call would change: counts per table and a diff of the rows
// (removed, added, changed cells marked), all of it escaped, since an agent wrote the data. And a
// call whose rows changed after it was approved comes back as a new card saying so.

let box: Sandbox;
let server: WebServer;
let client: AgentDbClient;
let browser: Browser;
let adminKey: string;

const HOSTILE = '<img src=x onerror="window.__pwned=1">';
const free = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
const gated = { ...free, settings: { database: 'agent' as const, approval: 'write' as const } };

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  client = box.client();
  server = await startWebServer(box);
  adminKey = (await server.members.add('acme', 'ada', 'admin')).key;
  browser = await chromium.launch(CHROMIUM);
  for (const [sql, params] of [
    ['CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT UNIQUE, company TEXT)', []],
    ['INSERT INTO leads VALUES (1, ?, ?), (2, ?, ?), (3, ?, ?)', ['a@x', 'A', 'b@x', HOSTILE, 'c@x', 'C']],
  ] as const) {
    expect(await client.call({ ...free, tool: 'DATA_WRITE_SQL', arguments: { sql, params: [...params] } })).toMatchObject({ ok: true });
  }
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await box?.cleanup();
});

it('shows a parked write as a diff, escaped; a call whose rows changed after approval comes back superseded', { timeout: 90_000 }, async () => {
  const update = await client.call(
    { ...gated, tool: 'DATA_WRITE_SQL', arguments: { sql: "UPDATE leads SET company = 'Acme' WHERE id <= 2" } },
    { wait: false },
  );
  const replace = await client.call(
    { ...gated, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT OR REPLACE INTO leads VALUES (9, ?, ?)', params: ['c@x', 'Cyan'] } },
    { wait: false },
  );
  expect(update).toMatchObject({ status: 'awaiting_approval' });
  expect(replace).toMatchObject({ status: 'awaiting_approval' });
  const updateId = (update as { approval: { id: string } }).approval.id;
  const replaceId = (replace as { approval: { id: string } }).approval.id;

  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${server.url}/sign-in`);
  await page.getByLabel('Member key').fill(adminKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/inbox/);

  const updated = page.locator(`article[data-approval="${updateId}"]`);
  await updated.waitFor();
  await expect.poll(() => updated.locator('.effect-counts li').textContent()).toBe('leads: 0 inserted · 2 updated · 0 deleted');
  const changed = updated.locator('table.diff td.changed');
  expect(await changed.count()).toBe(2);
  expect(await changed.nth(0).locator('del').textContent()).toBe('A');
  expect(await changed.nth(0).locator('ins').textContent()).toBe('Acme');
  // The agent's markup is text in the cell, never an element on the page.
  expect(await changed.nth(1).locator('del').textContent()).toBe(HOSTILE);
  expect(await updated.locator('table.diff img').count()).toBe(0);
  expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
  // Unchanged cells are not marked.
  expect(await updated.locator('tr[data-op="update"]').nth(0).locator('td:not(.changed)').allTextContents()).toEqual(['1', 'a@x']);

  const replaced = page.locator(`article[data-approval="${replaceId}"]`);
  expect(await replaced.locator('.effect-counts li').textContent()).toBe('leads: 1 inserted · 0 updated · 1 deleted');
  expect(await replaced.locator('tr[data-op="delete"] td.removed').allTextContents()).toEqual(['3', 'c@x', 'C']);
  expect(await replaced.locator('tr[data-op="insert"] td.added').allTextContents()).toEqual(['9', 'c@x', 'Cyan']);

  // Row 3 now matches the UPDATE too: approving it must not update three rows unseen.
  expect(await client.call({ ...free, tool: 'DATA_WRITE_SQL', arguments: { sql: 'UPDATE leads SET id = 0 WHERE id = 3' } })).toMatchObject({ ok: true });
  await updated.getByRole('button', { name: 'Approve' }).click();
  await page.waitForURL(/decided=approved/);
  const again = page.locator('article[data-approval]', { has: page.locator('.effect-note') });
  await expect
    .poll(async () => {
      await page.reload();
      return again.count();
    })
    .toBe(1);
  expect(await again.locator('.effect-note').textContent()).toContain(`The data changed after approval ${updateId} was given`);
  expect(await again.locator('.effect-counts li').textContent()).toBe('leads: 0 inserted · 3 updated · 0 deleted');
  const decided = page.locator(`#decided tr[data-approval="${updateId}"]`);
  // The call asks again before its first approval is marked superseded (two writes): a page
  // loaded between them shows the new one and the old still approved (seen once in CI).
  await expect
    .poll(async () => {
      await page.reload();
      return decided.locator('td').first().textContent();
    })
    .toBe('superseded');
  expect(await decided.getByRole('link', { name: 'asked again' }).count()).toBe(1);
  const rows = await client.call({ ...free, tool: 'DATA_QUERY_SQL', arguments: { sql: "SELECT count(*) FROM leads WHERE company = 'Acme'" } });
  expect(rows).toMatchObject({ ok: true, result: { rows: [[0]] } });
  await context.close();
});
