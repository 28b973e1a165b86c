import type { Browser } from 'playwright-core';
import { beforeAll, expect, it } from 'vitest';
import type { HistoryClient } from '../../src/shards/history-client.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { withBrowserHistory } from '../helpers/browser-history.ts';
import type { WebServer } from '../helpers/web-server.ts';

// The history page answered a restore (or an undo) with the result page itself, at the POST's
// URL: reloading it, or going back to it, sent the restore again and restored a second time.
// A restore now answers with a redirect to the history page, which reloads harmlessly.
const DB = 'acme/scout';

let server: WebServer;
let client: AgentDbClient;
let browser: Browser;
let adminKey: string;
let history: HistoryClient;

withBrowserHistory(undefined, (h) => {
  ({ server, client, browser, adminKey, history } = h);
});

const write = (sql: string) => client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });

beforeAll(async () => {
  expect(await write('CREATE TABLE t(a)')).toMatchObject({ ok: true });
  expect(await write('INSERT INTO t VALUES (1)')).toMatchObject({ ok: true });
}, 60_000);

it('undoing a restore on the page, then reloading, undoes it once', { timeout: 60_000 }, async () => {
  const latest = (await history.history(DB, 'operator')).latest!;
  const restore = await history.restore(DB, { at: latest, by: { who: 'acme/@ada', via: 'key' } }, 'operator');
  expect(restore.undoId).toBeTruthy();

  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${server.url}/sign-in?next=${encodeURIComponent(`/data/history?db=${encodeURIComponent(DB)}`)}`);
  await page.getByLabel('Member key').fill(adminKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/data\/history\?/);
  await page.getByRole('button', { name: 'Undo this restore' }).click();
  await page.waitForURL(/restored=/);
  const outcome = page.locator('#restore-outcome');
  expect(await outcome.locator('h2').textContent()).toBe('Restored');
  const points = (await history.history(DB, 'operator')).undoPoints;
  expect(points).toHaveLength(2);
  // The outcome offers the undo of the restore it reports, not of another.
  expect(await outcome.locator('input[name=undo]').getAttribute('value')).toBe(points.find((p) => p.id !== restore.undoId)!.id);

  const again = await page.reload();
  expect(again?.request().method()).toBe('GET');
  expect(await outcome.locator('h2').textContent()).toBe('Restored');
  // Still the restore and its one undo: the reload restored nothing.
  expect((await history.history(DB, 'operator')).undoPoints).toHaveLength(2);
  await context.close();
});

it('shows no outcome for an undo point the history does not have', { timeout: 60_000 }, async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${server.url}/sign-in?next=${encodeURIComponent(`/data/history?db=${encodeURIComponent(DB)}&restored=u-made-up`)}`);
  await page.getByLabel('Member key').fill(adminKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/data\/history\?/);
  await page.getByRole('heading', { name: `History of ${DB}` }).waitFor();
  expect(await page.locator('#restore-outcome').count()).toBe(0);
  await context.close();
});
