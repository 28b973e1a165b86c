import { describe, expect, it } from 'vitest';
import type { ActivityEntry } from '../../src/history/activity-view.ts';
import { AgentDbError } from '../../src/errors.ts';
import { isAfterPosition, refusedAfter, takenFromPage } from '../../src/history/restore-preview.ts';

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

describe('takenFromPage: what a restore takes away, read from a plain page (a worker of a build before `after`)', () => {
  it('counts when the page reaches an entry kept, or is the last page; else says there are more', () => {
    expect(takenFromPage(page, 'g0000000001.00000002.0', true)).toMatchObject({ count: 4, more: false, kept: page[4] });
    expect(takenFromPage(page, 'g0000000001.00000001.2', false)).toEqual({ entries: page, more: false, count: page.length });
    expect(takenFromPage(page, 'g0000000001.00000001.2', true)).toEqual({ entries: page, more: true });
  });

  it('knows a refusal of the key from an older worker by its code and words', () => {
    expect(refusedAfter(new AgentDbError('INVALID_ARGUMENTS', 'Unrecognized key: "after"'))).toBe(true);
    expect(refusedAfter(new AgentDbError('INVALID_ARGUMENTS', '"x" is no commit of acme/a\'s history'))).toBe(false);
    expect(refusedAfter(new AgentDbError('NOT_FOUND', 'after'))).toBe(false);
  });
});
