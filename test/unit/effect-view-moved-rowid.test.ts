import { describe, expect, it } from 'vitest';
import type { Approval } from '../../src/approvals/approval.ts';
import type { Effect } from '../../src/contracts/effect.ts';
import { effectView } from '../../src/http/web/effect-view.ts';

// A rowid table without an INTEGER PRIMARY KEY holds its rowid in no column: an update that
// moves a row shows `rowid` before → after on that row alone (session 34, R8). The card's table
// takes its columns from every row, so the other rows showed NULL under `rowid`, as if they had
// none; they show their own rowid, unchanged.
const effect: Effect = {
  tables: [{ table: 't', columns: ['a', 'b'], inserted: 0, updated: 2, deleted: 0 }],
  rows: [
    { table: 't', op: 'update', key: { rowid: 1 }, before: { a: 'x', b: 'one', rowid: 1 }, after: { a: 'x', b: 'one', rowid: 100 } },
    { table: 't', op: 'update', key: { rowid: 7 }, before: { a: 'y', b: 'two' }, after: { a: 'y', b: 'three' } },
  ],
  cut: false,
  digest: '0'.repeat(64),
} as unknown as Effect;

const parked = { id: 'ap_x', state: 'pending', tool: 'DATA_WRITE_SQL', effect } as unknown as Approval;

describe('an inbox card whose update moved one row of a rowid table', () => {
  it('shows the other rows their own rowid, not NULL', () => {
    const card = String(effectView(parked));
    const rowOf = (key: number) => card.match(new RegExp(`<tr class="update" data-op="update" data-key="\\{&quot;rowid&quot;:${key}\\}">(.*?)</tr>`))?.[1];
    expect(rowOf(1)).toContain('<del>1</del> → <ins>100</ins>');
    const other = rowOf(7);
    expect(other).toBeDefined();
    expect(other).not.toContain('NULL');
    expect(other).toContain('<td>7</td>');
    expect(other).toContain('<del>two</del> → <ins>three</ins>');
  });
});
