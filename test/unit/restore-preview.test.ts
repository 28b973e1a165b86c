import { describe, expect, it } from 'vitest';
import type { ActivityEntry } from '../../src/history/activity-view.ts';
import { entriesAfter } from '../../src/history/restore-preview.ts';

const entry = (id: string, extra: Partial<ActivityEntry> = {}): ActivityEntry => ({
  id: `${id}~0123abcd`,
  at: '2026-12-01T00:00:00.000Z',
  kind: 'call',
  restoreBefore: 'x',
  ...extra,
});

// Newest first, as the activity list gives them: a gap generation g2 holding one call, then commits of g2.
const page = [
  entry('g0000000002.00000001.1'),
  entry('g0000000002.00000001.0'),
  entry('g0000000002.held.7', { heldIn: 'g0000000002' }),
  entry('g0000000002', { kind: 'gap', held: 1 }),
  entry('g0000000001.00000002.0'),
  entry('g0000000001.00000001.12'),
  entry('g0000000001.00000001.3'),
];
const ids = (r: { after: ActivityEntry[] }) => r.after.map((e) => e.id.split('~')[0]);

describe('entriesAfter: what a restore to a history position takes away', () => {
  it('is every entry after the commit restored to, across segments and generations', () => {
    expect(ids(entriesAfter(page, 'g0000000001.00000001.3'))).toEqual(page.slice(0, -1).map((e) => e.id.split('~')[0]));
    expect(entriesAfter(page, 'g0000000001.00000001.12').done).toBe(true);
    // Commit numbers compare as numbers: 12 is after 3.
    expect(ids(entriesAfter(page, 'g0000000001.00000001.12'))).not.toContain('g0000000001.00000001.12');
  });

  it("keeps a gap and the calls its snapshot holds when restoring to its generation's first state", () => {
    expect(ids(entriesAfter(page, 'g0000000002'))).toEqual(['g0000000002.00000001.1', 'g0000000002.00000001.0']);
  });

  it('takes nothing away at the last commit; says when the page ended before the state', () => {
    expect(entriesAfter(page, 'g0000000002.00000001.1')).toEqual({ after: [], done: true, kept: page[0] });
    expect(entriesAfter(page.slice(0, 2), 'g0000000001.00000001.3')).toMatchObject({ done: false });
  });
});
