import { describe, expect, it } from 'vitest';
import { RowMatcher, matchRows, type Group } from '../../src/history/activity-match.ts';
import { prng } from '../helpers/history.ts';

// The activity list keeps its match per database and goes on with it as history and the rows
// grow (review H29-4). Going on must give what matching everything from the start gives: here
// on random histories that grow the ways capture grows them (a new millisecond, more commits in
// the last one, a generation's snapshot, rows ahead of the commits they belong to).

const clone = (groups: Group[]): Group[] => groups.map((g) => ({ ...g, commits: [...g.commits], rows: [] }));

describe('RowMatcher going on', () => {
  it('equals matchRows over the whole history after each step, on 300 random histories', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const rand = prng(seed);
      const groups: Group[] = [];
      const rows: { at: number }[] = [];
      const matcher = new RowMatcher(groups);
      let commits = 0;
      let t = 1000;
      let rowT = 1000;
      for (let step = 0; step < 40; step++) {
        const before = groups.length;
        const adds = Math.floor(rand() * 4);
        for (let a = 0; a < adds; a++) {
          const kind = rand();
          const last = groups.at(-1);
          if (kind < 0.1) groups.push({ at: (t += Math.floor(rand() * 3)), commits: [], rows: [], snapshot: true });
          else if (kind < 0.4 && last && !last.snapshot) last.commits.push(commits++);
          else groups.push({ at: (t += 1 + Math.floor(rand() * 3)), commits: [commits++], rows: [], snapshot: false });
        }
        const newRows = Math.floor(rand() * 4);
        for (let r = 0; r < newRows; r++) rows.push({ at: (rowT = Math.min(t + 3, rowT + Math.floor(rand() * 3))) });
        matcher.update(rows, Math.max(0, before - 1), commits);
        expect(matcher.byCommit, `seed ${seed} step ${step}`).toEqual(matchRows(clone(groups), rows, commits));
        expect(
          groups.map((g) => g.rows),
          `seed ${seed} step ${step}`,
        ).toEqual(
          (() => {
            const fresh = clone(groups);
            matchRows(fresh, rows, commits);
            return fresh.map((g) => g.rows);
          })(),
        );
      }
    }
  });

  it('places a row that came before its commit once the commit is read', () => {
    const groups: Group[] = [{ at: 10, commits: [0], rows: [], snapshot: false }];
    const matcher = new RowMatcher(groups);
    matcher.update([{ at: 9 }, { at: 11 }], 0, 1);
    expect(matcher.byCommit).toEqual([0]);
    groups.push({ at: 12, commits: [1], rows: [], snapshot: false });
    matcher.update([{ at: 9 }, { at: 11 }], 0, 2);
    expect(matcher.byCommit).toEqual([0, 1]);
  });
});
