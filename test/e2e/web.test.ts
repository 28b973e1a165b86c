import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { startWebServer, type WebServer } from '../helpers/web-server.ts';
import { CHROMIUM } from '../helpers/chromium.ts';

// The web page in a real browser: Debian's Chromium driven by playwright-core (no downloaded
// browser), against the app and a shard worker pool over a sandboxed Redis prefix and data folder.
const DOCS = fileURLToPath(new URL('../../docs/', import.meta.url));
/** Screenshots for docs/web.md are written only when asked, so test runs leave the tree alone. */
const SHOTS = process.env.AGENTDB_SCREENSHOTS === '1';

const WS = 'acme';
const AGENT = 'scout';
const DB = `${WS}/${AGENT}`;
const open = { database: 'agent' as const };
const gated = { database: 'agent' as const, approval: 'write' as const };

let box: Sandbox;
let server: WebServer;
let client: AgentDbClient;
let browser: Browser;
let adminKey: string;
let memberKey: string;

async function write(sql: string, settings: object = open, extra: object = {}) {
  const answer = await client.call({ workspace: WS, agent: AGENT, settings, tool: 'DATA_WRITE_SQL', arguments: { sql, ...extra } });
  return answer;
}

async function signIn(context: BrowserContext, key: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${server.url}/inbox`);
  await page.waitForURL(/\/sign-in/);
  await page.getByLabel('Member key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/inbox/);
  return page;
}

/** Every id in the first grid column. */
const gridIds = (page: Page) => page.$$eval('#grid tbody tr', (rows) => rows.map((r) => Number((r as HTMLTableRowElement).cells[0]!.textContent)));

/** CSV the way RFC 4180 and docs/web.md say, written here independently of the server's code. */
function expectedCsv(file: string, table: string): string {
  const db = new Database(file, { readonly: true });
  try {
    const stmt = db.prepare(`SELECT * FROM "${table}" ORDER BY rowid`).safeIntegers(true).raw(true);
    const field = (v: unknown): string => {
      if (v === null) return '';
      if (typeof v === 'bigint' || typeof v === 'number') return String(v);
      if (Buffer.isBuffer(v)) return `0x${v.toString('hex')}`;
      let s = String(v);
      if ('=+-@\t\r'.includes(s[0] ?? 'x')) s = `'${s}`;
      return /[",\r\n]/.test(s) ? `"${s.split('"').join('""')}"` : s;
    };
    const lines = [
      stmt
        .columns()
        .map((c) => field(c.name))
        .join(','),
    ];
    for (const row of stmt.iterate() as Iterable<unknown[]>) lines.push(row.map(field).join(','));
    return `${lines.join('\r\n')}\r\n`;
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  // A bound on one export's bytes above the table's CSV (~1 MB) and below what an endless view sends.
  box = sandbox({ EXPORT_MAX_BYTES: String(5 * 1024 * 1024) });
  await box.pool();
  client = box.client();
  server = await startWebServer(box);
  adminKey = (await server.members.add(WS, 'ada', 'admin')).key;
  memberKey = (await server.members.add(WS, 'bob', 'member')).key;
  browser = await chromium.launch(CHROMIUM);
  // The agent's table, with values a CSV writer and an HTML page must both get right.
  expect(await write('CREATE TABLE big(id INTEGER PRIMARY KEY, name TEXT, score REAL, note TEXT, data BLOB)')).toMatchObject({ ok: true });
  const rows = await write(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
    INSERT INTO big(id, name, score, note, data) SELECT i,
      CASE i % 8 WHEN 0 THEN '=SUM(A1:A9)' WHEN 1 THEN 'a,b "quoted"' WHEN 2 THEN 'line1' || char(10) || 'line2'
        WHEN 3 THEN NULL WHEN 4 THEN 'ünïcødé ✓ ' || i WHEN 5 THEN '-' || i WHEN 6 THEN '<script>window.__xss = 1</script>' ELSE '@home' || char(9) END,
      (i * 7919) % 1000 / 10.0,
      CASE WHEN i % 13 = 0 THEN NULL ELSE '<img src=x onerror="window.__xss = 2">' || i END,
      CASE WHEN i % 100 = 0 THEN x'00ff10' ELSE NULL END
    FROM n`);
  expect(rows).toMatchObject({ ok: true, result: { changes: 10000 } });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await box?.cleanup();
});

describe('the web page in Chromium', { timeout: 60_000 }, () => {
  it('refuses a wrong key with a clear error on the sign-in page', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${server.url}/sign-in`);
    await page.getByLabel('Member key').fill('adb_not-a-real-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('not an active member key');
    expect(page.url()).toContain('/sign-in');
    await context.close();
  });

  it("shows a parked write live, and approving it completes the agent's waiting call", async () => {
    const context = await browser.newContext();
    const page = await signIn(context, adminKey);
    expect(await page.locator('#no-pending').textContent()).toContain('Nothing is waiting');
    await page.locator('#live', { hasText: /^live$/ }).waitFor();
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    const payload = `<img src=x onerror=alert('inbox')>`;
    const waiting = write(`INSERT INTO big(id, name) VALUES (20001, ?)`, gated, { params: [payload], rationale: '<script>alert("why")</script> tidy up' });
    const card = page.locator('article[data-approval]');
    await card.waitFor();
    // The agent's text arrives as characters, not markup.
    expect(await card.locator('pre.sql').textContent()).toBe('INSERT INTO big(id, name) VALUES (20001, ?)');
    expect(await card.textContent()).toContain(payload);
    expect(await card.textContent()).toContain('<script>alert("why")</script> tidy up');
    expect(await card.getByRole('link', { name: /table big/ }).getAttribute('href')).toBe(`/data/table?db=${encodeURIComponent(DB)}&table=big`);
    if (SHOTS) await page.screenshot({ path: path.join(DOCS, 'web-inbox.png'), fullPage: true });
    await card.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL(/decided=approved/);
    const answer = await waiting;
    expect(answer).toMatchObject({ ok: true, result: { changes: 1 } });
    expect(await page.locator('#decided tbody tr').first().textContent()).toContain('ada');
    expect(dialogs).toEqual([]);
    await context.close();
  });

  it('rejects a parked write with a reason the agent receives', async () => {
    const context = await browser.newContext();
    const page = await signIn(context, adminKey);
    await page.locator('#live', { hasText: /^live$/ }).waitFor();
    const waiting = write(`DELETE FROM big WHERE id > 9000`, gated);
    const card = page.locator('article[data-approval]');
    await card.waitFor();
    await card.getByLabel('Reason').fill('keep the last thousand rows');
    await card.getByRole('button', { name: 'Reject' }).click();
    await page.waitForURL(/decided=rejected/);
    const answer = await waiting;
    expect(answer).toMatchObject({ ok: false, error: { code: 'APPROVAL_REJECTED' } });
    expect(JSON.stringify(answer)).toContain('keep the last thousand rows');
    const row = page.locator('#decided tbody tr', { hasText: 'keep the last thousand rows' });
    expect(await row.textContent()).toContain('rejected');
    await context.close();
  });

  it('takes a call decided elsewhere off the open inbox and lists the decision, without a reload', async () => {
    const context = await browser.newContext();
    const page = await signIn(context, memberKey);
    await page.locator('#live', { hasText: /^live$/ }).waitFor();
    let loads = 0;
    page.on('load', () => loads++);
    const waiting = write('INSERT INTO big(id) VALUES (20002)', gated);
    const card = page.locator('article[data-approval]');
    await card.waitFor();
    const id = await card.getAttribute('data-approval');
    // Decided through the HTTP API by someone else.
    const res = await fetch(`${server.url}/v1/approvals/${id}/decision`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ decision: 'reject', reason: 'decided in the API' }),
    });
    expect(res.status).toBe(200);
    await card.waitFor({ state: 'detached' });
    await page.locator('#decided tbody tr', { hasText: 'decided in the API' }).waitFor();
    expect(await page.locator('#no-pending').isVisible()).toBe(true);
    expect(loads).toBe(0);
    expect(await waiting).toMatchObject({ ok: false, error: { code: 'APPROVAL_REJECTED' } });
    await context.close();
  });

  it('pages through a 10,000-row table by keyset, jumps to a page and sorts', async () => {
    // The row the approved write added goes first, so the table is 10,000 rows again.
    await write('DELETE FROM big WHERE id = 20001');
    const context = await browser.newContext();
    const page = await signIn(context, memberKey);
    await page.goto(`${server.url}/data`);
    await page.getByRole('link', { name: DB }).click();
    expect(await page.locator('#tables tbody tr', { hasText: 'big' }).textContent()).toContain('10000');
    await page.getByRole('link', { name: 'big', exact: true }).click();
    expect(await gridIds(page)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(await page.locator('#page-label').textContent()).toBe('page 1 of 100 · 10000 rows');
    for (let p = 2; p <= 4; p++) await page.getByRole('link', { name: 'Next' }).click();
    expect(await gridIds(page)).toEqual(Array.from({ length: 100 }, (_, i) => i + 301));
    expect(await page.locator('#page-label').textContent()).toContain('page 4 of 100');
    expect(await page.locator('#server-time').textContent()).toMatch(/server \d+\.\d ms/);
    await page.getByRole('link', { name: 'Previous' }).click();
    expect((await gridIds(page))[0]).toBe(201);

    await page.getByLabel('Page', { exact: true }).fill('100');
    await page.getByRole('button', { name: 'Go' }).click();
    expect(await gridIds(page)).toEqual(Array.from({ length: 100 }, (_, i) => i + 9901));
    expect(await page.getByRole('button', { name: 'Next' }).isDisabled()).toBe(true);
    await page.getByRole('link', { name: 'Previous' }).click();
    expect((await gridIds(page))[0]).toBe(9801);

    await page.getByLabel('Rows per page').selectOption('25');
    await page.getByRole('button', { name: 'Show' }).click();
    expect(await gridIds(page)).toHaveLength(25);

    // Sorted by score, descending (two clicks on its header), ties in rowid order reversed.
    const file = databasePath(box.dataDir, WS, AGENT, shardOf(DB, box.config.shardCount));
    const direct = new Database(file, { readonly: true });
    const expected = direct.prepare('SELECT id FROM big ORDER BY score DESC, rowid DESC').pluck().all() as number[];
    direct.close();
    await page.getByRole('link', { name: 'score' }).click();
    await page.getByRole('link', { name: /score/ }).click();
    expect(await page.locator('th[aria-sort=descending]').textContent()).toContain('score');
    expect(await gridIds(page)).toEqual(expected.slice(0, 25));
    await page.getByRole('link', { name: 'Next' }).click();
    await page.getByRole('link', { name: 'Next' }).click();
    expect(await gridIds(page)).toEqual(expected.slice(50, 75));
    if (SHOTS) {
      await page.goto(`${server.url}/data/table?db=${encodeURIComponent(DB)}&table=big&size=25`);
      await page.screenshot({ path: path.join(DOCS, 'web-grid.png'), fullPage: true });
    }
    await context.close();
  });

  it('renders stored XSS payloads as inert characters', async () => {
    const context = await browser.newContext();
    const page = await signIn(context, memberKey);
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    await page.goto(`${server.url}/data/table?db=${encodeURIComponent(DB)}&table=big&size=25`);
    const cells = await page.$$eval('#grid tbody td', (tds) => tds.map((td) => td.textContent));
    expect(cells).toContain('<script>window.__xss = 1</script>');
    expect(cells).toContain('<img src=x onerror="window.__xss = 2">1');
    expect(await page.locator('#grid img, #grid script').count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
    expect(dialogs).toEqual([]);
    await context.close();
  });

  it('exports the table as CSV equal byte for byte to the table, plainly and with progress', async () => {
    const file = databasePath(box.dataDir, WS, AGENT, shardOf(DB, box.config.shardCount));
    const expected = expectedCsv(file, 'big');
    const context = await browser.newContext({ acceptDownloads: true });
    const page = await signIn(context, memberKey);
    await page.goto(`${server.url}/data/table?db=${encodeURIComponent(DB)}&table=big`);
    const [plain] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download CSV' }).click()]);
    expect(plain.suggestedFilename()).toBe('big.csv');
    const bytes = readFileSync((await plain.path())!);
    expect(bytes.equals(Buffer.from(expected, 'utf8'))).toBe(true);
    expect(bytes.toString('utf8')).toContain(`'=SUM(A1:A9)`);

    const [withProgress] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export with progress' }).click()]);
    expect(readFileSync((await withProgress.path())!).equals(bytes)).toBe(true);
    await page.locator('#export-status span', { hasText: 'done' }).waitFor();
    expect(await page.locator('#export-status span').textContent()).toBe('done: 10,000 rows');
    expect(await page.locator('#export-status progress').evaluate((p) => (p as HTMLProgressElement).value)).toBe(1);
    await context.close();
  });

  it("says a view's export was cut off at EXPORT_MAX_BYTES, and saves nothing", async () => {
    const view = "CREATE VIEW forever AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT i, printf('%.200c', 'x') AS pad FROM r";
    expect(await write(view)).toMatchObject({ ok: true });
    const context = await browser.newContext({ acceptDownloads: true });
    const page = await signIn(context, memberKey);
    const downloads: unknown[] = [];
    page.on('download', (d) => downloads.push(d));
    await page.goto(`${server.url}/data/table?db=${encodeURIComponent(DB)}&table=forever`);
    await page.getByRole('button', { name: 'Export with progress' }).click();
    const said = page.locator('#export-status span', { hasText: 'cut off' });
    await said.waitFor();
    expect(await said.textContent()).toMatch(
      /^the download was cut off after [\d.]+ MB, nothing was saved: an export stops before 5\.0 MB \(EXPORT_MAX_BYTES\)/,
    );
    expect(downloads).toEqual([]);
    await context.close();
  });

  it('lets an admin drop a shared table after typing its name, and not a member', async () => {
    const shared = await client.call({
      workspace: WS,
      agent: AGENT,
      settings: { database: 'workspace', sharedData: true },
      tool: 'DATA_WRITE_SQL',
      arguments: { scope: 'workspace', sql: 'CREATE TABLE scratch(x)' },
    });
    expect(shared).toMatchObject({ ok: true });
    const url = `${server.url}/data/table?db=${WS}&table=scratch`;

    const memberContext = await browser.newContext();
    const member = await signIn(memberContext, memberKey);
    await member.goto(url);
    expect(await member.locator('#drop-denied').textContent()).toContain('Only a workspace admin');
    expect(await member.locator('#drop-form').count()).toBe(0);
    // Sent anyway (with a valid session and token), the policy refuses it: the drop is the member's own call.
    const refused = await member.evaluate(async (db) => {
      const csrf = document.querySelector<HTMLMetaElement>('meta[name=csrf-token]')!.content;
      const res = await fetch('/data/drop', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: csrf, db, table: 'scratch', confirm: 'scratch' }),
      });
      return { status: res.status, text: await res.text() };
    }, WS);
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('NOT_PERMITTED');

    const adminContext = await browser.newContext();
    const admin = await signIn(adminContext, adminKey);
    await admin.goto(url);
    const drop = admin.getByRole('button', { name: 'Drop table' });
    expect(await drop.isDisabled()).toBe(true);
    await admin.getByLabel(/to confirm/).fill('scratc');
    expect(await drop.isDisabled()).toBe(true);
    await admin.getByLabel(/to confirm/).fill('scratch');
    await drop.click();
    await admin.waitForURL(/dropped=scratch/);
    expect(await admin.getByRole('status').textContent()).toContain('Dropped scratch');
    expect(await admin.locator('#tables', { hasText: 'scratch' }).count()).toBe(0);
    const gone = await client.call({
      workspace: WS,
      agent: AGENT,
      settings: { database: 'workspace' },
      tool: 'DATA_QUERY_SQL',
      arguments: { scope: 'workspace', sql: 'SELECT * FROM scratch' },
    });
    expect(gone).toMatchObject({ ok: false, error: { code: 'SQL_ERROR' } });
    await memberContext.close();
    await adminContext.close();
  });

  it('lets an admin see the restorable range, dry-run a restore, restore in place and undo it', async () => {
    expect(await write('CREATE TABLE h(v TEXT)')).toMatchObject({ ok: true });
    expect(await write("INSERT INTO h VALUES ('one')")).toMatchObject({ ok: true });
    // The page picks whole seconds: the second after 'one' is the moment to go back to.
    const moment = Math.ceil((Date.now() + 1) / 1000) * 1000;
    while (Date.now() <= moment) await new Promise((r) => setTimeout(r, moment + 5 - Date.now()));
    expect(await write("INSERT INTO h VALUES ('two')")).toMatchObject({ ok: true });
    const values = async () =>
      (
        (await client.call({
          workspace: WS,
          agent: AGENT,
          settings: open,
          tool: 'DATA_QUERY_SQL',
          arguments: { sql: 'SELECT v FROM h ORDER BY rowid' },
        })) as unknown as { result: { rows: string[][] } }
      ).result.rows.flat();
    expect(await values()).toEqual(['one', 'two']);

    const context = await browser.newContext();
    const page = await signIn(context, adminKey);
    await page.goto(`${server.url}/data/db?db=${encodeURIComponent(DB)}`);
    expect(await page.locator('#history-line').textContent()).toMatch(/Restorable from \d{4}-.*Z to \d{4}-.*Z/);
    await page.getByRole('link', { name: 'History and restore' }).click();
    await page.getByLabel('Time (UTC)').fill(new Date(moment).toISOString().slice(0, 19));
    await page.getByRole('button', { name: 'Dry run' }).click();
    const outcome = page.locator('#restore-outcome');
    expect(await outcome.locator('h2').textContent()).toBe('Dry run');
    // It goes back to the last commit at or before the moment picked: 'one', not 'two'.
    const to = Date.parse((await outcome.locator('dd').first().textContent())!);
    expect(to).toBeLessThanOrEqual(moment);
    expect(await outcome.textContent()).toMatch(/commits\d+/);
    // Commits a person counts, not the WAL frames they wrote (review R1 low).
    expect(await outcome.textContent()).not.toContain('frames');
    // What it would take away, listed: the write of 'two'.
    expect(await outcome.locator('#taken-away li').allTextContents()).toEqual([expect.stringContaining("INSERT INTO h VALUES ('two')")]);
    expect(await values()).toEqual(['one', 'two']);
    if (SHOTS) await page.screenshot({ path: path.join(DOCS, 'web-history.png'), fullPage: true });

    // Restoring in place takes the database's name typed: the button waits for it exactly.
    const restoreNow = page.getByRole('button', { name: 'Restore in place now' });
    expect(await restoreNow.isDisabled()).toBe(true);
    await page
      .locator('#restore-form')
      .getByLabel(/to confirm/)
      .fill(DB.toUpperCase());
    expect(await restoreNow.isDisabled()).toBe(true);
    expect(await values()).toEqual(['one', 'two']);
    await page
      .locator('#restore-form')
      .getByLabel(/to confirm/)
      .fill(DB);
    await restoreNow.click();
    expect(await outcome.locator('h2').textContent()).toBe('Restored');
    expect(await values()).toEqual(['one']);
    await page.getByRole('button', { name: 'Undo this restore' }).first().click();
    expect(await outcome.locator('h2').textContent()).toBe('Restored');
    expect(await values()).toEqual(['one', 'two']);

    const memberContext = await browser.newContext();
    const member = await signIn(memberContext, memberKey);
    await member.goto(`${server.url}/data/db?db=${encodeURIComponent(DB)}`);
    expect(await member.locator('#history-line').textContent()).toContain('for workspace admins');
    await memberContext.close();
    await context.close();
  });

  it('refuses a POST without the session token', async () => {
    const context = await browser.newContext();
    const page = await signIn(context, adminKey);
    const status = await page.evaluate(
      async () => (await fetch('/sign-out', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' })).status,
    );
    expect(status).toBe(403);
    await context.close();
  });

  it('signs a revoked member out at once, on the open page and on the next request', async () => {
    const { key } = await server.members.add(WS, 'cleo', 'member');
    const context = await browser.newContext();
    const page = await signIn(context, key);
    await page.locator('#live', { hasText: /^live$/ }).waitFor();
    await server.members.revoke(WS, 'cleo');
    // The next event on the open inbox's stream finds the member gone and sends the page to sign in.
    const parked = write('INSERT INTO big(id) VALUES (30001)', gated);
    await page.waitForURL(/\/sign-in/);
    await page.goto(`${server.url}/data`);
    expect(page.url()).toContain('/sign-in');
    // Leave nothing parked behind.
    const pending = await fetch(`${server.url}/v1/approvals`, { headers: { authorization: `Bearer ${adminKey}` } }).then(
      (r) => r.json() as Promise<{ approvals: { id: string }[] }>,
    );
    for (const a of pending.approvals) {
      await fetch(`${server.url}/v1/approvals/${a.id}/decision`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ decision: 'reject' }),
      });
    }
    expect(await parked).toMatchObject({ ok: false, error: { code: 'APPROVAL_REJECTED' } });
    await context.close();
  });
});

if (SHOTS) mkdirSync(DOCS, { recursive: true });
