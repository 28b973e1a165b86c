import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer } from '../helpers/web-server.ts';
import { CHROMIUM } from '../helpers/chromium.ts';

// The history page lists what was done, newest first; a person undoes an agent's mistake by
// restoring to just before its entry, confirmed by typing the database's name in place.
const DB = 'acme/scout';

let box: Sandbox;
let server: WebServer;
let client: AgentDbClient;
let browser: Browser;
let adminKey: string;

const scout = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
const write = (sql: string, rationale?: string) => client.call({ ...scout, tool: 'DATA_WRITE_SQL', arguments: { sql, ...(rationale ? { rationale } : {}) } });
const emails = async () =>
  ((await client.call({ ...scout, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT email FROM leads ORDER BY id' } })) as any).result.rows.map(
    (r: unknown[]) => r[0],
  );

beforeAll(async () => {
  box = sandbox();
  await box.pool();
  client = box.client();
  server = await startWebServer(box);
  adminKey = (await server.members.add('acme', 'ada', 'admin')).key;
  browser = await chromium.launch(CHROMIUM);
  expect(await write('CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT)')).toMatchObject({ ok: true });
  expect(await write("INSERT INTO leads(email) VALUES ('a@x'), ('b@x')")).toMatchObject({ ok: true });
  expect(await write("DELETE FROM leads WHERE email = 'a@x'", 'remove a bounced address')).toMatchObject({ ok: true });
  expect(await write("INSERT INTO leads(email) VALUES ('c@x')")).toMatchObject({ ok: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await box?.cleanup();
});

it('restores to just before an entry of the activity list, with the typed confirmation, and the row comes back; forks as of another', {
  timeout: 60_000,
}, async () => {
  expect(await emails()).toEqual(['b@x', 'c@x']);
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${server.url}/sign-in?next=${encodeURIComponent(`/data/history?db=${encodeURIComponent(DB)}`)}`);
  await page.getByLabel('Member key').fill(adminKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/data\/history\?/);

  // Newest first: the insert of c@x, then the delete with its rationale.
  const entries = page.locator('#activity > li');
  expect(await entries.count()).toBe(4);
  await expect.poll(() => entries.first().locator('pre.sql').textContent()).toContain('c@x');
  const mistake = entries.nth(1);
  expect(await mistake.locator('pre.sql').textContent()).toContain("DELETE FROM leads WHERE email = 'a@x'");
  expect(await mistake.textContent()).toContain('remove a bounced address');
  expect(await mistake.textContent()).toContain('1 row changed');
  expect(await mistake.textContent()).toContain('agent scout');
  // Generations and snapshots are folded away.
  expect(await page.locator('#generations').isVisible()).toBe(false);

  // A wrong name restores nothing.
  await mistake.getByText('Restore to just before this…').click();
  await mistake.getByLabel(/Type .* to confirm/).fill('acme/other');
  await mistake.getByRole('button', { name: 'Restore', exact: true }).click();
  await page.getByText("type the database's name").waitFor();
  expect(await emails()).toEqual(['b@x', 'c@x']);

  await page.goBack();
  await page.waitForURL(/\/data\/history\?/);
  const again = page.locator('#activity > li').nth(1);
  if (!(await again.getByLabel(/Type .* to confirm/).isVisible())) await again.getByText('Restore to just before this…').click();
  await again.getByLabel(/Type .* to confirm/).fill(DB);
  await again.getByRole('button', { name: 'Restore', exact: true }).click();
  await page.waitForURL(/restored=/);
  expect(await page.locator('#restore-outcome h2').textContent()).toBe('Restored');
  // The deleted row is back, and the later insert undone with it.
  expect(await emails()).toEqual(['a@x', 'b@x']);
  // The restore heads the list; the calls it undid are still listed below it.
  const after = page.locator('#activity > li');
  expect(await after.first().getAttribute('class')).toContain('restore');
  expect(await after.count()).toBe(5);

  // Fork as of the insert of c@x (undone by the restore): a new database with it, typed by name.
  const insert = after.filter({ hasText: "VALUES ('c@x')" });
  await insert.getByText('Fork as of this…').click();
  await insert.getByLabel("Type the new database's name").fill('scout-with-c');
  await insert.getByRole('button', { name: 'Fork', exact: true }).click();
  await page.waitForURL(/\/data\/db\?db=acme%2Fscout-with-c/);
  const forked = await client.call({ ...scout, agent: 'scout-with-c', tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT email FROM leads ORDER BY id' } });
  expect((forked as any).result.rows.map((r: unknown[]) => r[0])).toEqual(['b@x', 'c@x']);
  expect(await emails()).toEqual(['a@x', 'b@x']);
  await context.close();
});
