import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer } from '../helpers/web-server.ts';
import { CHROMIUM } from '../helpers/chromium.ts';

// Signed-in pages show what agents stored. Back after "Sign out" showed the last page again
// from the browser's cache, rows and all, to whoever uses the browser next; it must ask the
// server, which sends it to the sign-in page.

let box: Sandbox;
let server: WebServer;
let client: AgentDbClient;
let browser: Browser;
let adminKey: string;

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  client = box.client();
  server = await startWebServer(box);
  adminKey = (await server.members.add('acme', 'ada', 'admin')).key;
  browser = await chromium.launch(CHROMIUM);
  const settings = { database: 'agent' as const };
  expect(
    await client.call({ workspace: 'acme', agent: 'scout', settings, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE secrets(v TEXT)' } }),
  ).toMatchObject({ ok: true });
  expect(
    await client.call({
      workspace: 'acme',
      agent: 'scout',
      settings,
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: "INSERT INTO secrets VALUES ('the-private-row')" },
    }),
  ).toMatchObject({ ok: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await box?.cleanup();
});

it('Back after signing out asks the server again and lands on the sign-in page', { timeout: 60_000 }, async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const grid = `/data/table?db=${encodeURIComponent('acme/scout')}&table=secrets`;
  await page.goto(`${server.url}/sign-in?next=${encodeURIComponent(grid)}`);
  await page.getByLabel('Member key').fill(adminKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/data\/table/);
  expect(await page.locator('main').textContent()).toContain('the-private-row');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(/\/sign-in/);
  expect(await page.getByRole('status').textContent()).toContain('Signed out');
  await page.goBack();
  await page.waitForURL(/\/sign-in/);
  expect(await page.locator('body').textContent()).not.toContain('the-private-row');
  await context.close();
});
