import fs from 'node:fs';
import Database from 'better-sqlite3';
import type { Browser } from 'playwright-core';
import { beforeAll, expect, it } from 'vitest';
import { listGenerations, listSegments, localSource } from '../../src/history/history-files.ts';
import type { HistoryClient } from '../../src/shards/history-client.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import type { Sandbox } from '../helpers/harness.ts';
import { withBrowserHistory } from '../helpers/browser-history.ts';
import type { WebServer } from '../helpers/web-server.ts';

// `agentdb history` lists lost stretches (restores there answer HISTORY_LOST) and marks damaged
// generations; the web page's history showed neither, so a person saw one whole restorable range
// and met the refusal only on a dry run (issue 25 part 1: every listing says which moments are lost).
const DB = 'acme/scout';

let box: Sandbox;
let pool: ShardWorkerPool;
let server: WebServer;
let client: AgentDbClient;
let browser: Browser;
let adminKey: string;
let history: HistoryClient;

withBrowserHistory({ SHARD_COUNT: '2' }, (h) => {
  ({ box, pool, server, client, browser, adminKey, history } = h);
});

const write = (sql: string) =>
  client.call({
    workspace: 'acme',
    agent: 'scout',
    settings: { database: 'agent' },
    tool: 'DATA_WRITE_SQL',
    arguments: { sql },
  });

beforeAll(async () => {
  expect(await write('CREATE TABLE t(a)')).toMatchObject({ ok: true });
  for (let i = 0; i < 3; i++) expect(await write(`INSERT INTO t VALUES (${i})`)).toMatchObject({ ok: true });

  // The page's restore form takes whole seconds: the lost stretch must hold one, so the dry run
  // below always has a moment inside it to try.
  await new Promise((resolve) => setTimeout(resolve, 1_100));

  // Every handle closed (the worker stops), then another program writes the file: the next
  // capture finds the file no longer matches its seal, and begins a `gap` generation that lost
  // the outside commit.
  await pool.stop();
  const file = databasePath(box.dataDir, 'acme', 'scout', shardOf(DB, box.config.shardCount));
  const outside = new Database(file);
  outside.prepare('INSERT INTO t VALUES (99)').run();
  outside.close();
  pool = await box.pool();
  expect(await write('INSERT INTO t VALUES (100)')).toMatchObject({ ok: true });
}, 60_000);

/** The first generation's index gets a damaged line (rot in a closed segment). */
function damageFirstIndex(): void {
  const first = listGenerations(localSource(box.dataDir, DB))[0]!;
  const index = listSegments(first)[0]!.indexPath;
  const lines = fs.readFileSync(index, 'utf8').split('\n');
  lines[1] = 'x'.repeat(lines[1]!.length);
  fs.writeFileSync(index, lines.join('\n'));
}

it('the history page lists the lost stretches and marks the damaged generation, as agentdb history does', {
  timeout: 60_000,
}, async () => {
  const lostView = await history.history(DB, 'operator');
  expect(lostView.lost).toHaveLength(1);

  const context = await browser.newContext({ timezoneId: 'UTC' });
  const page = await context.newPage();
  await page.goto(`${server.url}/sign-in?next=${encodeURIComponent(`/data/history?db=${encodeURIComponent(DB)}`)}`);
  await page.getByLabel('Member key').fill(adminKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/data\/history\?/);

  // A dry run inside the lost stretch is refused with the code the page named.
  const after = Date.parse(lostView.lost[0]!.after);
  const before = Date.parse(lostView.lost[0]!.before);
  // The first whole second after the last kept commit: inside, as the stretch lasts over a second.
  const inside = new Date(Math.floor(after / 1000) * 1000 + 1000);
  expect(inside.getTime()).toBeLessThan(before);
  await page.getByLabel('Time (UTC)').fill(inside.toISOString().slice(0, 19));
  await page.getByRole('button', { name: 'Dry run' }).click();
  await page.getByText('HISTORY_LOST').first().waitFor();

  // Then rot in the first generation (a restore through it would answer HISTORY_CORRUPT, so the
  // dry run above came first), and the page lists both troubles.
  damageFirstIndex();
  const view = await history.history(DB, 'operator');
  expect(view.lost).toHaveLength(1);
  const damaged = view.generations.filter((g) => g.damaged);
  expect(damaged).toHaveLength(1);
  await page.goto(`${server.url}/data/history?db=${encodeURIComponent(DB)}`);

  const trouble = page.locator('#history-trouble');
  await trouble.getByRole('heading', { name: 'Lost stretches' }).waitFor();
  const lostRows = trouble.locator('#lost tbody tr');
  expect(await lostRows.count()).toBe(1);
  expect(await lostRows.locator('td').nth(2).textContent()).toBe(view.lost[0]!.generation);
  expect(await trouble.textContent()).toContain('HISTORY_LOST');
  expect(await trouble.locator('#damaged li').allTextContents()).toEqual([`${damaged[0]!.id}: ${damaged[0]!.damaged}`]);
  // The generations table says why each began, and which is damaged.
  const row = page.locator('#generations tr.damaged');
  expect(await row.count()).toBe(1);
  expect(await row.locator('td').first().textContent()).toBe(damaged[0]!.id);
  expect(await row.textContent()).toContain('DAMAGED');
  expect(await page.locator('#generations tbody tr').last().textContent()).toContain('gap');

  // The database's page warns too.
  await page.goto(`${server.url}/data/db?db=${encodeURIComponent(DB)}`);
  expect(await page.locator('#history-line').textContent()).toContain('1 lost stretch, 1 damaged generation');
  await context.close();
});
