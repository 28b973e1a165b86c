import { AgentDbError } from '../errors.ts';
import { ACTIVITY_RETENTION_MS } from '../sqlite/sqlite-activity.ts';
import type { ActivityCache } from './activity-cache.ts';
import { ActivityHistory, type ActivityRows } from './activity-history.ts';

export type { ActivityRows, HistoryCommit } from './activity-history.ts';
export { matchRows, type Group } from './activity-match.ts';

/**
 * Who made a commit, as the activity list shows it: `agent:<name>`, `member:<name>` or
 * `operator:<name>`. A member's restore is recorded as `<workspace>/@<member>` (the form approvals
 * and the audit log use); shown in the one `kind:name` form beside that member's own writes. The
 * workspace adds nothing there: a member restores only their own workspace's databases.
 */
export function whoMade(by: string | undefined): string | undefined {
  const member = by === undefined ? undefined : /^[^/]+\/@(.+)$/s.exec(by);
  return member ? `member:${member[1]}` : by;
}

/** One commit of a database's history as the activity list shows it (the HTTP contract of `GET /v1/databases/:db/activity`). */
export interface ActivityEntry {
  /** The commit's place in history: `<generation>.<segment>.<n>`; `before` this pages on. */
  id: string;
  /** When history captured the commit (ISO). */
  at: string;
  /**
   * `call`: an agent's or member's write or drop; `restore`: a restore (or its undo); `outside`:
   * a commit no agentdb call made (a program outside agentdb wrote to the file); `unknown`: a
   * commit older than the activity rows kept (`ACTIVITY_RETENTION_MS`), made by whoever it was.
   */
  kind: 'call' | 'restore' | 'outside' | 'unknown';
  /** `agent:<name>` or `member:<name>`; for a restore, who asked (`<workspace>/@<member>`, `operator:<name>`). */
  by?: string;
  tool?: string;
  callId?: string;
  /** The SQL of a write, the table of a drop, or what a restore went back to; cut (see `statementCut`). */
  statement?: string;
  /** Bytes of the statement left out; absent when it is whole. */
  statementCut?: number;
  rationale?: string;
  approvedBy?: string;
  /** Rows the write changed (a drop: the rows of the table, when known). */
  rowsChanged?: number;
  /**
   * The history position of the state just before this commit, for a restore `through` it: the
   * id of the commit before (`<generation>.<segment>.<n>`) or a generation (its first state).
   * A position, not a time: commits captured in the same millisecond before this one are kept.
   */
  restoreBefore: string;
}

/** A page of {@link ActivityEntry}, newest first. */
export interface ActivityPage {
  database: string;
  entries: ActivityEntry[];
  /** The `before` of the next page; absent on the last. */
  next?: string;
}

/** Entries a page holds when the caller names no limit, and at most. */
export const ACTIVITY_PAGE = { default: 50, max: 200 } as const;

/**
 * A page of database `id`'s history as what was done, newest first: each commit history holds,
 * as the call (or restore) that made it, or as made outside agentdb. agentdb's own upkeep
 * commits are left out. `before`: an entry's id, the page starts after it. `onRead` hears how
 * many commits and activity rows the page read afresh (what it is charged for, beyond a lookup).
 * @throws AgentDbError INVALID_ARGUMENTS for a `before` that names no commit of this history;
 * RESOURCE_LIMIT for a history past `ACTIVITY_READ_LIMIT`.
 */
export async function activityPage(
  dataDir: string,
  id: string,
  rows: ActivityRows,
  opts: PageOptions = {},
  now = Date.now(),
  cache?: ActivityCache,
): Promise<ActivityPage> {
  if (cache) return cache.with(dataDir, id, async (history) => pageOf(history, id, rows, opts, now));
  return pageOf(new ActivityHistory(dataDir, id), id, rows, opts, now);
}

/** A page's size and start, and who hears what it read. */
export interface PageOptions {
  limit?: number;
  before?: string;
  onRead?: (items: number) => void;
}

async function pageOf(history: ActivityHistory, id: string, rows: ActivityRows, opts: PageOptions, now: number): Promise<ActivityPage> {
  const limit = Math.min(Math.max(1, opts.limit ?? ACTIVITY_PAGE.default), ACTIVITY_PAGE.max);
  const readBefore = history.reads.commits + history.reads.rows;
  await history.refresh(rows);
  opts.onRead?.(history.reads.commits + history.reads.rows - readBefore);
  const { commits, order } = history;
  const match = history.matcher.byCommit;
  let from = commits.length - 1;
  if (opts.before !== undefined) {
    const at = history.indexOf(opts.before);
    if (at < 0)
      throw new AgentDbError('INVALID_ARGUMENTS', `${JSON.stringify(opts.before)} is no commit of ${id}'s history (pruned, or from another database)`);
    from = at - 1;
  }
  const kindOf = (i: number) => {
    const r = match[i];
    return r === undefined ? 'outside' : order[r]!.kind;
  };
  // Commit `i` is the restore `j`'s own (its pages, when its audit row is `j`): no entry of its own.
  const restoresOwn = (i: number, j: number) =>
    j >= 0 && j < commits.length && kindOf(i) === 'outside' && kindOf(j) === 'restore' && commits[i]!.at >= order[match[j]!]!.at;
  // Just before an entry is before its restore's own commit too, when it has one.
  const stateBefore = (c: number) => (c > 0 && restoresOwn(c - 1, c) ? commits[c - 1]!.prev : commits[c]!.prev);
  const picked: number[] = [];
  let i = from;
  for (; i >= 0 && picked.length < limit; i--) {
    const kind = kindOf(i);
    // A restore's base commit is its generation's start; a fork's has no row of its own.
    if (kind === 'upkeep' || (kind === 'outside' && commits[i]!.base)) continue;
    // A restore within a generation is two commits (its pages, then its audit row), a rebuilt one's
    // outside write beside it is its own doing: the one commit of it with no row is the restore's.
    if (kind === 'outside' && [i - 1, i + 1].some((j) => restoresOwn(i, j))) continue;
    picked.push(i);
  }
  // More entries older than the page? (upkeep and a restore's second commit are not entries.)
  let more = false;
  for (let j = i; j >= 0 && !more; j--) more = kindOf(j) !== 'upkeep' && !(commits[j]!.base && kindOf(j) === 'outside');
  const wanted = picked.flatMap((c) => (match[c] === undefined ? [] : [order[match[c]!]!.seq]));
  const whole = new Map((wanted.length ? await rows.some(wanted) : []).map((r) => [r.seq, r]));
  const entries = picked.map((c): ActivityEntry => {
    const commit = commits[c]!;
    const row = match[c] === undefined ? undefined : whole.get(order[match[c]!]!.seq);
    const base: ActivityEntry = {
      id: commit.id,
      at: new Date(commit.at).toISOString(),
      // Past the rows' retention, a commit without one may have had one, pruned since.
      kind: row?.kind === 'restore' ? 'restore' : row ? 'call' : commit.at < now - ACTIVITY_RETENTION_MS ? 'unknown' : 'outside',
      restoreBefore: stateBefore(c),
    };
    if (!row) return base;
    const cut = row.statement !== null && row.statementBytes !== null ? row.statementBytes - Buffer.byteLength(row.statement) : 0;
    return {
      ...base,
      ...(row.by !== null ? { by: row.by } : {}),
      ...(row.tool !== null ? { tool: row.tool } : {}),
      ...(row.callId !== null ? { callId: row.callId } : {}),
      ...(row.statement !== null ? { statement: row.statement } : {}),
      ...(cut > 0 ? { statementCut: cut } : {}),
      ...(row.rationale !== null ? { rationale: row.rationale } : {}),
      ...(row.approvedBy !== null ? { approvedBy: row.approvedBy } : {}),
      ...(row.changes !== null ? { rowsChanged: row.changes } : {}),
    };
  });
  return { database: id, entries, ...(more && picked.length ? { next: commits[picked.at(-1)!]!.id } : {}) };
}
