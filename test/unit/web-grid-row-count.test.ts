import { describe, expect, it } from 'vitest';
import type { GridPage } from '../../src/contracts/browse.ts';
import { gridView } from '../../src/http/web/grid-view.ts';
import { html } from '../../src/http/web/html.ts';

// The grid said "page 1 of 1 · 1 rows" for a one-row table.
const page = (n: number): GridPage => ({
  table: 'contacts',
  type: 'table',
  columns: [{ name: 'id', type: 'INTEGER', primaryKey: true }],
  rows: Array.from({ length: n }, (_, i) => [i + 1]),
  hasPrev: false,
  hasNext: false,
  keyset: true,
  sqliteMs: 0.1,
});
const q = { db: 'acme/scout', table: 'contacts', size: 25, dir: 'asc' as const, p: 1 };

describe('the grid row count', () => {
  it('says "1 row", and "2 rows"', () => {
    expect(gridView({ ...q, total: 1 }, page(1), { serverMs: 1 }, html``).value).toContain('page 1 of 1 · 1 row</span>');
    expect(gridView({ ...q, total: 2 }, page(2), { serverMs: 1 }, html``).value).toContain('page 1 of 1 · 2 rows</span>');
  });
});
