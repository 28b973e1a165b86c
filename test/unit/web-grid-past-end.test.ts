import { describe, expect, it } from 'vitest';
import type { GridPage } from '../../src/contracts/browse.ts';
import { gridView } from '../../src/http/web/grid-view.ts';
import { html } from '../../src/http/web/html.ts';

// A page past the end of a table (page=9 of 3 typed into the URL, or a link kept while rows
// were deleted) said "page 9 of 3 · No more rows" and offered Previous to page 8, just as empty.
// It now says so and links to the last page.
const empty: GridPage = {
  table: 'contacts',
  type: 'table',
  columns: [{ name: 'id', type: 'INTEGER', primaryKey: true }],
  rows: [],
  hasPrev: true,
  hasNext: false,
  keyset: true,
  sqliteMs: 0.1,
};
const q = { db: 'acme/scout', table: 'contacts', size: 25, dir: 'asc' as const, total: 60 };

describe('the grid past its last page', () => {
  it('says the page is past the last one and links to it, from the notice and from Previous', () => {
    const out = gridView({ ...q, p: 9 }, empty, { serverMs: 1 }, html``).value;
    expect(out).toContain('Page 9 is past the last page.');
    const last = '/data/table?db=acme%2Fscout&amp;table=contacts&amp;size=25&amp;dir=asc&amp;total=60&amp;page=3&amp;p=3';
    expect(out).toContain(`<a href="${last}">Go to page 3</a>`);
    expect(out).toContain(`<a class="button" href="${last}" rel="prev">Previous</a>`);
  });

  it('still calls an empty table empty', () => {
    const out = gridView({ ...q, total: 0, p: 1 }, { ...empty, hasPrev: false }, { serverMs: 1 }, html``).value;
    expect(out).toContain('This table is empty.');
  });
});
