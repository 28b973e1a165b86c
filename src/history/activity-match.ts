import type { ActivityRow } from '../sqlite/sqlite-activity.ts';

/** A run of commits captured in the same millisecond, or a generation's snapshot, for matching. */
export interface Group {
  at: number;
  /** Commit indexes (into the commits list); empty for a snapshot, which takes any number of rows. */
  commits: number[];
  rows: number[];
  snapshot: boolean;
  /**
   * A snapshot's generation, why it was taken, and the history position of the state before it
   * (the last commit of the generation before; absent for a history's first or a fork's): what
   * the list shows of the commits a snapshot holds (a gap's: `gap` and `held` entries).
   */
  of?: { generation: string; reason: string; before?: string };
}

/**
 * {@link matchRows}' pass, kept so that it can go on: history only appends commits (a new group,
 * or more commits in the last group's millisecond) and rows only append, so a page need not match
 * the whole history again. `update` redoes the pass from the first row that reached a group that
 * changed; the rows before it went to groups that did not change, under the same conditions, so
 * the result is the pass over everything from the start (see `test/unit/activity-match.test.ts`).
 */
export class RowMatcher {
  /** The commit each commit's row is (index into the rows), by commit index. */
  readonly byCommit: (number | undefined)[] = [];
  /** The group each row's pass stopped at (`groups.length` then: none yet, it waits for the next). */
  private readonly reached: number[] = [];
  private gi = 0;
  /** Groups before it are the only ones whose commits may have a row in `byCommit`. */
  private setTo = 0;

  constructor(private readonly groups: Group[]) {}

  /**
   * Matches `rows` (the same rows as before, maybe more after them) with the groups: those before
   * `changedFrom` are as the last update saw them, the rest changed or are new. Matches at most
   * `most` rows of those not matched yet (a long pass goes on in pieces, the event loop served
   * between them: call again with `changedFrom` = `groups.length`); answers whether all are.
   */
  update(rows: Pick<ActivityRow, 'at'>[], changedFrom: number, commitCount: number, most = Number.POSITIVE_INFINITY): boolean {
    const { groups, reached, byCommit } = this;
    let r0 = reached.length;
    while (r0 > 0 && reached[r0 - 1]! >= changedFrom) r0--;
    // The old pass went past every group before `changedFrom` for row r0: the new one does too.
    if (r0 < reached.length) this.gi = changedFrom;
    reached.length = r0;
    for (let g = changedFrom; g < groups.length; g++) groups[g]!.rows.length = 0;
    // The new rows may go to groups before `changedFrom` too, from where the pass stands.
    const touched = Math.min(changedFrom, this.gi);
    const end = Math.min(rows.length, r0 + most);
    for (let ri = r0; ri < end; ri++) {
      const at = rows[ri]!.at;
      let gi = this.gi;
      while (gi < groups.length && (groups[gi]!.at < at || (!groups[gi]!.snapshot && groups[gi]!.rows.length >= groups[gi]!.commits.length))) gi++;
      this.gi = gi;
      reached.push(gi);
      groups[gi]?.rows.push(ri);
    }
    while (byCommit.length < commitCount) byCommit.push(undefined);
    // Rows went to groups up to `gi`; groups past it and past `setTo` have no row, before or now.
    const setTo = Math.min(groups.length, Math.max(this.setTo, this.gi + 1));
    for (let g = touched; g < setTo; g++) {
      const group = groups[g]!;
      if (group.snapshot) continue;
      for (const c of group.commits) byCommit[c] = undefined;
      const skip = group.commits.length - group.rows.length;
      for (const [k, r] of group.rows.entries()) byCommit[group.commits[skip + k]!] = r;
    }
    this.setTo = setTo;
    return end === rows.length;
  }
}

/**
 * Which activity row (by index into `rows`, ordered by seq) each commit's transaction wrote, or
 * undefined. A row is written inside its commit's transaction, before it commits, and capture
 * stamps the commit after it under the write lock: a row's commit is in the first group (in
 * history's order, after the previous row's) whose time is not before the row's, with a commit
 * left; a group's rows go to its last commits (agentdb's upkeep commits, its calls-table
 * housekeeping, come just before the write in the same capture). A snapshot takes the rows of
 * the commits it holds. Time is kept by the millisecond: a write begun in the very millisecond
 * of the capture before it can be placed one commit early, in which case the list is off by one
 * there (a cost of matching by time, not of reading each commit's pages).
 */
export function matchRows(groups: Group[], rows: Pick<ActivityRow, 'at'>[], commitCount: number): (number | undefined)[] {
  const matcher = new RowMatcher(groups);
  matcher.update(rows, 0, commitCount);
  return matcher.byCommit;
}
