import { AgentDbError } from '../errors.ts';
import { ACTIVITY_RETENTION_MS } from '../sqlite/sqlite-activity.ts';
import type { ActivityCache } from './activity-cache.ts';
import { heldIndexOf, heldSlots, itemId, itemsFrom, type Item } from './activity-held.ts';
import { ActivityHistory } from './activity-history.ts';
import type { ActivityRows } from './activity-rows.ts';
import type { Group } from './activity-match.ts';
import { positionIn, positionToken } from './position-token.ts';
import { isAfterPosition } from './restore-preview.ts';

export type { HistoryCommit } from './activity-history.ts';
export type { ActivityRows } from './activity-rows.ts';
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
  /**
   * The commit's place in history, `<generation>.<segment>.<n>`, marked with its database
   * (`~` and 8 hex digits: `position-token.ts`); `before` this pages on.
   */
  id: string;
  /** When history captured the commit (ISO). */
  at: string;
  /**
   * `call`: an agent's or member's write or drop; `restore`: a restore (or its undo); `outside`:
   * a commit no agentdb call made (a program outside agentdb wrote to the file); `unknown`: a
   * commit older than the activity rows kept (`ACTIVITY_RETENTION_MS`), made by whoever it was;
   * `gap`: a program outside agentdb wrote to the file and history began a new generation from a
   * snapshot of it (its id is the generation), which also holds the calls committed with that
   * write: they are listed just above it, each with `heldIn`.
   */
  kind: 'call' | 'restore' | 'outside' | 'unknown' | 'gap';
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
  /**
   * A call's commit held in a gap's snapshot (this generation's), with the outside write and any
   * other calls there: history cannot undo it alone. Its `restoreBefore` is the state before the
   * whole gap, and its id (`<generation>.held.<seq>`) pages but is no restore position (the
   * snapshot's state is its generation's: the gap entry's id).
   */
  heldIn?: string;
  /** A gap's: how many calls its snapshot holds (the entries with its `heldIn` just above it). */
  held?: number;
}

/** A page of {@link ActivityEntry}, newest first. */
export interface ActivityPage {
  database: string;
  entries: ActivityEntry[];
  /** The `before` of the next page; absent on the last. */
  next?: string;
  /**
   * The writes (calls and restores) the database holds that history has not captured yet: they
   * are not listed, and no restore or `as_of` reaches them, until capture catches up (it stops
   * on a full disk, the commits kept in the WAL). Absent when history holds every one.
   */
  behind?: { writes: number; note: string };
  /**
   * Asked with `after` (a restore's state): how many entries are after it in all, of which the
   * page holds the newest, and `kept`, the newest entry at or before it (absent when none is:
   * the state is before every entry listed).
   */
  taken?: { count: number; kept?: ActivityEntry };
}

/** Entries a page holds when the caller names no limit, and at most. */
export const ACTIVITY_PAGE = { default: 50, max: 200 } as const;

/**
 * A page of database `id`'s history as what was done, newest first: each commit history holds,
 * as the call (or restore) that made it, or as made outside agentdb. agentdb's own upkeep
 * commits are left out. `before`: an entry's id, the page starts after it. `onRead` hears how
 * many commits and activity rows the page read afresh (what it is charged for, beyond a lookup).
 * @throws AgentDbError INVALID_ARGUMENTS for a `before` that names no commit of this history;
 * HISTORY_POSITION_FOREIGN for one marked as another database's;
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
  /** An entry's id: the page starts with it (what a restore `--before` it reads its `restoreBefore` from). Not with `before`. */
  at?: string;
  /**
   * A history position (a restore's state): the page holds only the entries after it, newest
   * first, and `taken` counts them all and names the newest entry kept (session 36, N13: a
   * restore taking away more than a page named neither). From the top: not with `before` or `at`.
   */
  after?: string;
  onRead?: (items: number) => void;
}

async function pageOf(history: ActivityHistory, id: string, rows: ActivityRows, opts: PageOptions, now: number): Promise<ActivityPage> {
  const limit = Math.min(Math.max(1, opts.limit ?? ACTIVITY_PAGE.default), ACTIVITY_PAGE.max);
  const readBefore = history.reads.commits + history.reads.rows;
  try {
    await history.refresh(rows);
  } finally {
    // Heard whether the page is made or refused: a read up to the limit is charged too.
    opts.onRead?.(history.reads.commits + history.reads.rows - readBefore);
  }
  const { commits, order } = history;
  const match = history.matcher.byCommit;
  const held = heldSlots(history.groups, commits.length, order);
  const kindOf = (i: number) => {
    const r = match[i];
    return r === undefined ? 'outside' : order[r]!.kind;
  };
  // Commit `i` is the restore `j`'s own (its pages, when its audit row is `j`): no entry of its own.
  const restoresOwn = (i: number, j: number) =>
    j >= 0 && j < commits.length && kindOf(i) === 'outside' && kindOf(j) === 'restore' && commits[i]!.at >= order[match[j]!]!.at;
  // Just before an entry is before its restore's own commit too, when it has one.
  const stateBefore = (c: number) => (c > 0 && restoresOwn(c - 1, c) ? commits[c - 1]!.prev : commits[c]!.prev);
  const listed = (i: number) => {
    const kind = kindOf(i);
    // A restore's base commit is its generation's start; a fork's has no row of its own.
    if (kind === 'upkeep' || (kind === 'outside' && commits[i]!.base)) return false;
    // A restore within a generation is two commits (its pages, then its audit row), a rebuilt one's
    // outside write beside it is its own doing: the one commit of it with no row is the restore's.
    return !(kind === 'outside' && [i - 1, i + 1].some((j) => restoresOwn(i, j)));
  };
  let start: { commit: number; slotItem?: number } = { commit: commits.length - 1 };
  if (opts.before !== undefined) {
    const before = positionIn(id, opts.before);
    const inGap = heldIndexOf(held, before);
    const at = inGap ? inGap.position : history.indexOf(before);
    if (at < 0)
      throw new AgentDbError('INVALID_ARGUMENTS', `${JSON.stringify(opts.before)} is no commit of ${id}'s history (pruned, or from another database)`);
    start = { commit: at - 1, ...(inGap ? { slotItem: inGap.item } : {}) };
  } else if (opts.at !== undefined) {
    const from = positionIn(id, opts.at);
    const inGap = heldIndexOf(held, from);
    const at = inGap ? inGap.position : history.indexOf(from);
    if (at < 0) throw new AgentDbError('INVALID_ARGUMENTS', `${JSON.stringify(opts.at)} is no commit of ${id}'s history (pruned, or from another database)`);
    // The entry itself first: in a gap, from its own item; a commit, with none of the gaps after it.
    start = inGap ? { commit: at - 1, slotItem: inGap.item - 1 } : { commit: at, slotItem: Number.POSITIVE_INFINITY };
  }
  const picked: Item[] = [];
  const walk = itemsFrom(start, held, listed);
  let more = false;
  const state = opts.after === undefined ? undefined : positionIn(id, opts.after);
  // With a state, the walk goes on past the page to count what is after it (no rows are read
  // for those) and stops at the first entry kept.
  let count = 0;
  let kept: Item | undefined;
  for (const item of walk) {
    if (state !== undefined && !isAfterPosition(typeof item === 'number' ? commits[item]!.id : itemId(item), state)) {
      kept = item;
      break;
    }
    count++;
    if (picked.length === limit) {
      more = true;
      if (state === undefined) break;
    } else picked.push(item);
  }
  const seqOf = (item: Item) =>
    typeof item === 'number' ? (match[item] === undefined ? undefined : order[match[item]!]!.seq) : (item.seq ?? item.slot.restore);
  const wanted = [...picked, ...(kept !== undefined ? [kept] : [])].flatMap((item) => seqOf(item) ?? []);
  const whole = new Map((wanted.length ? await rows.some(wanted) : []).map((r) => [r.seq, r]));
  // An item as an entry, with its positions plain: `marked` marks them with the database.
  function entryOf(item: Item): ActivityEntry {
    const seq = seqOf(item);
    const row = seq === undefined ? undefined : whole.get(seq);
    let base: ActivityEntry;
    if (typeof item === 'number') {
      const commit = commits[item]!;
      base = {
        id: commit.id,
        at: new Date(commit.at).toISOString(),
        // Past the rows' retention, a commit without one may have had one, pruned since.
        kind: row?.kind === 'restore' ? 'restore' : row ? 'call' : commit.at < now - ACTIVITY_RETENTION_MS ? 'unknown' : 'outside',
        restoreBefore: stateBefore(item),
      };
    } else {
      const at = new Date(item.slot.at).toISOString();
      if (item.slot.restore !== undefined) base = { id: item.slot.generation, at, kind: 'restore', restoreBefore: item.slot.before };
      else if (item.seq === undefined) return { id: item.slot.generation, at, kind: 'gap', restoreBefore: item.slot.before, held: item.slot.rows.length };
      else base = { id: itemId(item), at, kind: row?.kind === 'restore' ? 'restore' : 'call', restoreBefore: item.slot.before, heldIn: item.slot.generation };
    }
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
  }
  const entries = picked.map((item): ActivityEntry => marked(id, entryOf(item)));
  const last = picked.at(-1);
  const nextId = last === undefined ? undefined : typeof last === 'number' ? commits[last]!.id : itemId(last);
  const writes = uncaptured(history.groups, order);
  return {
    database: id,
    entries,
    ...(more && nextId !== undefined ? { next: positionToken(id, nextId) } : {}),
    ...(writes ? { behind: { writes, note: behindNote(writes) } } : {}),
    ...(state !== undefined ? { taken: { count, ...(kept !== undefined ? { kept: marked(id, entryOf(kept)) } : {}) } } : {}),
  };
}

/** An entry as given out: its positions (its id, the state before it) marked with database `id` (`position-token.ts`). */
function marked(id: string, entry: ActivityEntry): ActivityEntry {
  return { ...entry, id: positionToken(id, entry.id), restoreBefore: positionToken(id, entry.restoreBefore) };
}

/**
 * The activity rows no commit of history took: the match is a forward pass, so they are the
 * rows after the last one a group took (a row commits before its capture, which the executor's
 * next request waits for: the rows a page reads were captured unless capture failed). agentdb's
 * upkeep rows are not counted.
 */
function uncaptured(groups: Group[], order: { kind: string }[]): number {
  let last = -1;
  for (let g = groups.length - 1; g >= 0 && last < 0; g--) last = groups[g]!.rows.at(-1) ?? -1;
  let writes = 0;
  for (let r = last + 1; r < order.length; r++) if (order[r]!.kind !== 'upkeep') writes++;
  return writes;
}

/** What a page says when history is behind the database. */
export function behindNote(writes: number): string {
  return `history is behind: ${writes} write${writes === 1 ? '' : 's'} not yet captured (disk full?); they are not listed, and no restore or as_of reaches them, until capture catches up`;
}
