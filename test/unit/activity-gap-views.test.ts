import { describe, expect, it } from 'vitest';
import { activityTable } from '../../src/cli/activity.ts';
import { behindNote, type ActivityPage } from '../../src/history/activity-view.ts';
import { activityView } from '../../src/http/web/activity-view.ts';

// Review R29 M1, M2 as a person reads them: the CLI's table and the history page show a gap and
// the calls its snapshot holds, and say when history is behind the database.
const page: ActivityPage = {
  database: 'acme/closer',
  entries: [
    {
      id: 'g0000000002.00000001.0',
      at: '2026-12-01T00:00:03.000Z',
      kind: 'call',
      by: 'agent:closer',
      statement: "INSERT INTO deals VALUES ('c3-1')",
      restoreBefore: 'g0000000002',
    },
    {
      id: 'g0000000002.held.65',
      at: '2026-12-01T00:00:02.000Z',
      kind: 'call',
      by: 'agent:closer',
      statement: "INSERT INTO deals VALUES ('c3-0')",
      restoreBefore: 'g0000000001.00000001.9',
      heldIn: 'g0000000002',
    },
    { id: 'g0000000002', at: '2026-12-01T00:00:02.000Z', kind: 'gap', restoreBefore: 'g0000000001.00000001.9', held: 1 },
  ],
  behind: { writes: 71, note: behindNote(71) },
};

describe('a gap and history behind, shown', () => {
  it('the CLI prints the note, the gap, and marks the held call', () => {
    const out = activityTable(page);
    expect(out).toContain('history is behind: 71 writes not yet captured (disk full?)');
    expect(out).toContain('a program outside agentdb wrote to the file: history took a snapshot, holding 1 call listed above it too');
    expect(out).toContain("INSERT INTO deals VALUES ('c3-0') [in gap g0000000002: restores only with it]");
  });

  it('the page shows the note and the gap, and offers no fork as of a held call', () => {
    const out = activityView('acme/closer', page, true, { csrf: 'tok', once: 'o' }, (b) => `?before=${b}`).value;
    expect(out).toContain('id="behind">history is behind: 71 writes not yet captured');
    expect(out).toContain('a new snapshot of the file, which also holds the 1 call listed just above');
    expect(out).toContain('Held in the snapshot of gap g0000000002');
    // Forks: the newest call and the gap, not the held call (it has no state of its own after it).
    expect(out.match(/Fork as of this/g)).toHaveLength(2);
    expect(out).not.toContain('name="through" value="g0000000002.held.65"');
  });

  it('says nothing of it when history holds every write', () => {
    expect(activityTable({ ...page, behind: undefined } as ActivityPage)).not.toContain('behind');
    expect(activityView('acme/closer', { database: 'x', entries: [] }, true, { csrf: 'tok', once: 'o' }, (b) => b).value).not.toContain('behind');
  });
});
