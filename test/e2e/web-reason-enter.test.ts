import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer } from '../helpers/web-server.ts';
import { CHROMIUM } from '../helpers/chromium.ts';

// Enter in an inbox card's Reason field used to submit the form with its first button, Approve:
// a person typing why they reject ("wrong table⏎") approved the call. Enter must decide nothing;
// only the button the person presses does.

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
  const made = await client.call({
    workspace: 'acme',
    agent: 'scout',
    settings: { database: 'agent' },
    tool: 'DATA_WRITE_SQL',
    arguments: { sql: 'CREATE TABLE t(a)' },
  });
  expect(made).toMatchObject({ ok: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await box?.cleanup();
});

it('Enter in the reason field decides nothing; the Reject button then rejects with that reason', { timeout: 60_000 }, async () => {
  const waiting = client.call({
    workspace: 'acme',
    agent: 'scout',
    settings: { database: 'agent', approval: 'write' },
    tool: 'DATA_WRITE_SQL',
    arguments: { sql: 'DELETE FROM t' },
  });
  const context = await browser.newContext();
  const page = await context.newPage();
  const decisions: string[] = [];
  page.on('request', (r) => {
    if (r.method() === 'POST' && r.url().includes('/decision')) decisions.push(r.postData() ?? '');
  });
  await page.goto(`${server.url}/sign-in`);
  await page.getByLabel('Member key').fill(adminKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/inbox/);
  const card = page.locator('article[data-approval]');
  await card.waitFor();
  // The guard is no button a person sees: the page's button style once showed it as an empty pill.
  expect(await card.locator('button[disabled][hidden]').isVisible()).toBe(false);
  const reason = card.getByLabel('Reason');
  await reason.fill('wrong table');
  await reason.press('Enter');
  // Had Enter submitted, its decision would have been sent before this click, and the first wins.
  await card.getByRole('button', { name: 'Reject' }).click();
  await page.waitForURL(/decided=rejected/);
  expect(decisions).toHaveLength(1);
  expect(decisions[0]).toContain('decision=reject');
  const answer = await waiting;
  expect(answer).toMatchObject({ ok: false, error: { code: 'APPROVAL_REJECTED' } });
  expect(JSON.stringify(answer)).toContain('wrong table');
  await context.close();
});
