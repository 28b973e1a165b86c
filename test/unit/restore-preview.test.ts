import { describe, expect, it } from 'vitest';
import type { ActivityEntry } from '../../src/history/activity-view.ts';
import { isAfterPosition } from '../../src/history/restore-preview.ts';

const entry = (id: string, extra: Partial<ActivityEntry> = {}): ActivityEntry => ({
  id: `${id}~0123abcd`,
  at: '2026-12-01T00:00:00.000Z',
  kind: 'call',
  restoreBefore: 'x',
  ...extra,
});

// Newest first, as the activity list gives them (each entry's id marked with its database): a gap generation g2 holding one call, then commits of g2.
const page = [
  entry('g0000000002.00000001.1'),
  entry('g0000000002.00000001.0'),
  entry('g0000000002.held.7', { heldIn: 'g0000000002' }),
  entry('g0000000002', { kind: 'gap', held: 1 }),
  entry('g0000000001.00000002.0'),
  entry('g0000000001.00000001.12'),
  entry('g0000000001.00000001.3'),
];
// What the activity list walks out before it stops at the first entry a restore to `state` keeps.
const takenBy = (state: string) => {
  const end = page.findIndex((e) => !isAfterPosition(e.id, state));
  return { ids: (end < 0 ? page : page.slice(0, end)).map((e) => e.id.split('~')[0]), kept: end < 0 ? undefined : page[end] };
};

describe('isAfterPosition: what a restore to a history position takes away', () => {
  it('is every entry after the commit restored to, across segments and generations', () => {
    expect(takenBy('g0000000001.00000001.3').ids).toEqual(page.slice(0, -1).map((e) => e.id.split('~')[0]));
    expect(takenBy('g0000000001.00000001.12').kept).toBe(page[5]);
    // Commit numbers compare as numbers: 12 is after 3.
    expect(takenBy('g0000000001.00000001.12').ids).not.toContain('g0000000001.00000001.12');
  });

  it("keeps a gap and the calls its snapshot holds when restoring to its generation's first state", () => {
    expect(takenBy('g0000000002').ids).toEqual(['g0000000002.00000001.1', 'g0000000002.00000001.0']);
  });

  it('takes nothing away at the last commit; keeps nothing at a state before every entry', () => {
    expect(takenBy('g0000000002.00000001.1')).toEqual({ ids: [], kept: page[0] });
    expect(takenBy('g0000000001.00000001.2')).toMatchObject({ kept: undefined });
    // A position marked with its database compares as the plain one.
    expect(isAfterPosition('g0000000001.00000001.4~0123abcd', 'g0000000001.00000001.3')).toBe(true);
  });
});
