import { describe, expect, it } from 'vitest';
import { matchRows, type Group } from '../../src/history/activity-view.ts';

// Matching history's commits with the activity rows their transactions wrote (pure: the order
// and times alone). Commits are numbered in history's order; a group is one capture's millisecond.
const commits = (at: number, ...ids: number[]): Group => ({ at, commits: ids, rows: [], snapshot: false });
const snapshot = (at: number): Group => ({ at, commits: [], rows: [], snapshot: true });
const rows = (...at: number[]) => at.map((a) => ({ at: a }));

describe('matchRows', () => {
  it('gives each row the commit captured at or after it, one row a commit, in order', () => {
    expect(matchRows([commits(10, 0), commits(20, 1), commits(30, 2)], rows(9, 20, 25), 3)).toEqual([0, 1, 2]);
  });

  it("gives a snapshot the rows of the commits it holds, and a commit with none is someone else's", () => {
    // Rows 0 and 1 were written before the snapshot at 5; commit 0 (at 10) has no row: an outside write.
    expect(matchRows([snapshot(5), commits(10, 0), commits(20, 1)], rows(1, 5, 15), 2)).toEqual([undefined, 2]);
  });

  it("puts a capture's rows on its last commits: upkeep or an outside commit comes first in it", () => {
    // One capture found an outside commit (0) then the call's (1); another an upkeep commit (2) and a write (3), both with rows.
    expect(matchRows([commits(10, 0, 1), commits(20, 2, 3)], rows(8, 18, 18), 4)).toEqual([undefined, 0, 1, 2]);
  });

  it('leaves rows whose commits history has not captured yet unmatched', () => {
    expect(matchRows([commits(10, 0)], rows(9, 11), 1)).toEqual([0]);
  });
});
