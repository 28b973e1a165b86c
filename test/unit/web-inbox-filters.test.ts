import { describe, expect, it } from 'vitest';
import { passes } from '../../src/approvals/approval-listing.ts';
import { databasesView } from '../../src/http/web/data-views.ts';
import { filterForm, inboxFilter, inboxHref } from '../../src/http/web/inbox-filters.ts';
import { ROW_COUNT_CAP } from '../../src/sqlite/sqlite-figures.ts';

// The inbox's filter (what a link may say, how it is kept) and the Data page's figures as
// rendered: pure functions of their input.
describe('the inbox filter', () => {
  it('takes names up to 200 characters and ignores empty or longer ones, as inbox links forgive', () => {
    expect(inboxFilter({ agent: 'scout', database: '', tool: 'x'.repeat(201) })).toEqual({ agent: 'scout' });
    expect(inboxFilter({})).toEqual({});
  });

  it('keeps the filter in links, encoded', () => {
    expect(inboxHref({ database: 'acme/scout', tool: 'DATA_WRITE_SQL' }, { p: '2' })).toBe('/inbox?database=acme%2Fscout&tool=DATA_WRITE_SQL&p=2');
    expect(inboxHref({})).toBe('/inbox');
  });

  it('matches on every field given, and every approval on none', () => {
    const a = { agent: 'scout', database: 'acme/scout', tool: 'DATA_WRITE_SQL' };
    expect(passes(a, {})).toBe(true);
    expect(passes(a, { agent: 'scout', tool: 'DATA_WRITE_SQL' })).toBe(true);
    expect(passes(a, { agent: 'scout', tool: 'DATA_DROP_TABLE' })).toBe(false);
    expect(passes(a, { database: 'acme' })).toBe(false);
  });

  it('offers the names the approvals carry, marks the chosen one (kept when none carries it now) and escapes them', () => {
    const form = filterForm({ agent: ['miner', 'scout'], database: ['acme/<b>'], tool: [] }, { agent: 'gone', database: 'acme/<b>' }).value;
    expect(form).toContain('<option value="gone" selected>gone</option>');
    expect(form).toContain('<option value="miner">miner</option>');
    expect(form).toContain('<option value="acme/&lt;b&gt;" selected>acme/&lt;b&gt;</option>');
    expect(form).not.toContain('<b>');
    expect(form).toContain('id="clear-filter"');
    expect(filterForm({ agent: [], database: [], tool: [] }, {}).value).not.toContain('clear-filter');
  });
});

describe("the Data page's figures", () => {
  const member = { workspace: 'acme', name: 'ada', role: 'admin' } as Parameters<typeof databasesView>[0];
  const dbs = [
    { id: 'acme', registered: true },
    { id: 'acme/scout', agent: 'scout', registered: true },
    { id: 'acme/miner', agent: 'miner', registered: false },
  ];

  it('shows size, tables, rows, last write and approvals waiting; "at least" past the cap; dashes for a database whose owner did not answer', () => {
    const page = databasesView(
      member,
      dbs,
      new Map([
        ['acme', { bytes: 0, tables: 0, rows: 0, lastWriteAt: null }],
        [
          'acme/scout',
          { bytes: 3 * 1024 * 1024, tables: 4, rows: ROW_COUNT_CAP + 17, rowsAtLeast: true as const, lastWriteAt: Date.UTC(2026, 11, 4, 10, 0, 0) },
        ],
      ]),
      new Map([['acme/scout', 3]]),
    ).value;
    const row = (db: string) => page.slice(page.indexOf(`data-db="${db}"`), page.indexOf('</tr>', page.indexOf(`data-db="${db}"`)));
    expect(row('acme/scout')).toContain('<td class="size">3.0 MB</td>');
    expect(row('acme/scout')).toContain('<td class="tables">4</td>');
    expect(row('acme/scout')).toContain(`at least ${(ROW_COUNT_CAP + 17).toLocaleString('en')}`);
    expect(row('acme/scout')).toContain('datetime="2026-12-04T10:00:00.000Z"');
    expect(row('acme/scout')).toContain('<a href="/inbox?database=acme%2Fscout">3</a>');
    expect(row('acme')).toContain('<td class="last-write">never</td>');
    expect(row('acme')).toContain('<td class="pending">0</td>');
    expect(row('acme/miner')).toContain('<td class="rows"><span class="muted">—</span></td>');
  });
});
