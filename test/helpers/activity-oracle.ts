// The activity list as it was built before it was kept per database (review H29-4): every page
// from the whole history and every row. Kept here verbatim as the oracle the kept listing must equal.
import { AgentDbError } from '../../src/errors.ts';
import { positionIn, positionToken } from '../../src/history/position-token.ts';
import { ACTIVITY_RETENTION_MS, type ActivityRow } from '../../src/sqlite/sqlite-activity.ts';
import { listGenerations, listSegments, localSource } from '../../src/history/history-files.ts';
import { readIndex } from '../../src/history/segment-index.ts';
// The contract (entries, pages, their limits) is the service's; what is kept verbatim is how a page was made.
import { ACTIVITY_PAGE, type ActivityEntry, type ActivityPage, behindNote } from '../../src/history/activity-view.ts';

/** A commit as the listing reads it from history's indexes, oldest first. */
export interface HistoryCommit {
  id: string;
  /** The state just before it: the commit before in history, or the generation's first state. */
  prev: string;
  at: number;
  /** The first commit of a restore's generation: the restore itself. */
  base: boolean;
}

/** A run of commits captured in the same millisecond, or a generation's snapshot, for matching. */
export interface Group {
  at: number;
  /** Commit indexes (into the commits list); empty for a snapshot, which takes any number of rows. */
  commits: number[];
  rows: number[];
  snapshot: boolean;
  of?: { generation: string; reason: string; before?: string };
}

/** Every commit history holds for `id` (the base commits of restores included), oldest first, with the groups to match rows with. */
function historyCommits(dataDir: string, id: string): { commits: HistoryCommit[]; groups: Group[] } {
  const commits: HistoryCommit[] = [];
  const groups: Group[] = [];
  let lastAt = 0;
  let prevEnd: number | undefined;
  let lastState: string | undefined;
  for (const g of listGenerations(localSource(dataDir, id))) {
    const snap = g.snapshot;
    if (!snap) continue;
    // Before a restore's base commit is the generation it left (the state the restore replaced);
    // before any other generation's first commit, its snapshot (a gap's may differ from the last commit before).
    let state = snap.base ? (lastState ?? g.name) : g.name;
    // A snapshot holds the commits before it history did not keep apart (the first writes, a
    // gap's, a fork's source's): their rows go to it. Not a restore in place's: what it holds
    // was matched with the generations before, and its restore's row is its base commit's.
    if (!snap.base || groups.length === 0)
      groups.push({
        at: snap.at,
        commits: [],
        rows: [],
        snapshot: true,
        of: { generation: g.name, reason: snap.reason, ...(lastState ? { before: lastState } : {}) },
      });
    for (const seg of listSegments(g)) {
      const records = readIndex(seg.indexPath).commits;
      records.forEach((c, n) => {
        const base = snap.base?.segment === seg.name && n === 0;
        // A base commit carries its snapshot's time; the restore made it when the generation before ended.
        const at = base ? Math.max(prevEnd ?? c.at, lastAt) : c.at;
        lastAt = Math.max(lastAt, at);
        const cid = `${g.name}.${seg.name}.${n}`;
        commits.push({ id: cid, prev: state, at, base });
        state = cid;
        const last = groups.at(-1);
        if (last && !last.snapshot && last.at === at) last.commits.push(commits.length - 1);
        else groups.push({ at, commits: [commits.length - 1], rows: [], snapshot: false });
      });
    }
    prevEnd = g.end?.endedAt;
    lastState = state;
  }
  return { commits, groups };
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
  let gi = 0;
  rows.forEach((row, ri) => {
    while (gi < groups.length && (groups[gi]!.at < row.at || (!groups[gi]!.snapshot && groups[gi]!.rows.length >= groups[gi]!.commits.length))) gi++;
    groups[gi]?.rows.push(ri);
  });
  const byCommit: (number | undefined)[] = new Array(commitCount).fill(undefined);
  for (const g of groups) {
    if (g.snapshot) continue;
    const skip = g.commits.length - g.rows.length;
    for (const [k, r] of g.rows.entries()) byCommit[g.commits[skip + k]!] = r;
  }
  return byCommit;
}

/** How `activityPage` reads the database's activity rows: order and time of all, or the whole rows of some. */
export interface ActivityRows {
  all(): Promise<Pick<ActivityRow, 'seq' | 'kind' | 'at'>[]>;
  some(seqs: number[]): Promise<ActivityRow[]>;
}

/**
 * A page of database `id`'s history as what was done, newest first: each commit history holds,
 * as the call (or restore) that made it, or as made outside agentdb. agentdb's own upkeep
 * commits are left out. `before`: an entry's id, the page starts after it.
 * @throws AgentDbError INVALID_ARGUMENTS for a `before` that names no commit of this history.
 */
async function plainPage(
  dataDir: string,
  id: string,
  rows: ActivityRows,
  opts: { limit?: number; before?: string } = {},
  now = Date.now(),
): Promise<ActivityPage> {
  const limit = Math.min(Math.max(1, opts.limit ?? ACTIVITY_PAGE.default), ACTIVITY_PAGE.max);
  const { commits, groups } = historyCommits(dataDir, id);
  const order = await rows.all();
  const match = matchRows(groups, order, commits.length);
  const kindOf = (i: number) => {
    const r = match[i];
    return r === undefined ? 'outside' : order[r]!.kind;
  };
  // Commit `i` is the restore `j`'s own (its pages, when its audit row is `j`): no entry of its own.
  const restoresOwn = (i: number, j: number) =>
    j >= 0 && j < commits.length && kindOf(i) === 'outside' && kindOf(j) === 'restore' && commits[i]!.at >= order[match[j]!]!.at;
  // Just before an entry is before its restore's own commit too, when it has one.
  const stateBefore = (c: number) => (c > 0 && restoresOwn(c - 1, c) ? commits[c - 1]!.prev : commits[c]!.prev);
  // Every entry, newest first (review R29 M1: a gap's snapshot is an entry, and the calls it holds
  // just above it), then the page: the entries after `before`.
  type Item = number | { gen: string; at: number; before: string; seq?: number; held: number };
  const all: Item[] = [];
  // An item's place: commit c at 2c + 1, a snapshot just before commit p at 2p.
  const keys: number[] = [];
  let seen = 0;
  for (const g of groups) {
    if (g.snapshot) {
      if (g.of?.reason !== 'gap' || g.of.before === undefined) continue;
      const seqs = g.rows.filter((r) => order[r]!.kind !== 'upkeep').map((r) => order[r]!.seq);
      const slot = { gen: g.of.generation, at: g.at, before: g.of.before, held: seqs.length };
      for (const item of [slot, ...seqs.map((seq) => ({ ...slot, seq }))]) {
        all.push(item);
        keys.push(2 * seen);
      }
      continue;
    }
    seen += g.commits.length;
    for (const c of g.commits) {
      const kind = kindOf(c);
      if (kind === 'upkeep' || (kind === 'outside' && commits[c]!.base)) continue;
      if (kind === 'outside' && [c - 1, c + 1].some((j) => restoresOwn(c, j))) continue;
      all.push(c);
      keys.push(2 * c + 1);
    }
  }
  all.reverse();
  keys.reverse();
  const idOf = (item: Item) => (typeof item === 'number' ? commits[item]!.id : item.seq === undefined ? item.gen : `${item.gen}.held.${item.seq}`);
  let first = 0;
  if (opts.before !== undefined) {
    const at = all.findIndex((item) => idOf(item) === opts.before);
    const commit = at < 0 ? commits.findIndex((c) => c.id === opts.before) : -1;
    if (at < 0 && commit < 0)
      throw new AgentDbError('INVALID_ARGUMENTS', `${JSON.stringify(opts.before)} is no commit of ${id}'s history (pruned, or from another database)`);
    // A commit that is no entry (upkeep): the page starts at the first entry older than it.
    first = at >= 0 ? at + 1 : keys.findIndex((k) => k < 2 * commit + 1);
    if (first < 0) first = all.length;
  }
  const picked = all.slice(first, first + limit);
  const more = first + limit < all.length;
  const seqOf = (item: Item) => (typeof item === 'number' ? (match[item] === undefined ? undefined : order[match[item]!]!.seq) : item.seq);
  const wanted = picked.flatMap((item) => seqOf(item) ?? []);
  const whole = new Map((wanted.length ? await rows.some(wanted) : []).map((r) => [r.seq, r]));
  const entries = picked.map((item): ActivityEntry => {
    const seq = seqOf(item);
    const row = seq === undefined ? undefined : whole.get(seq);
    let base: ActivityEntry;
    if (typeof item === 'number') {
      const commit = commits[item]!;
      base = {
        id: commit.id,
        at: new Date(commit.at).toISOString(),
        kind: row?.kind === 'restore' ? 'restore' : row ? 'call' : commit.at < now - ACTIVITY_RETENTION_MS ? 'unknown' : 'outside',
        restoreBefore: stateBefore(item),
      };
    } else {
      const at = new Date(item.at).toISOString();
      if (item.seq === undefined) return { id: item.gen, at, kind: 'gap', restoreBefore: item.before, held: item.held };
      base = { id: idOf(item), at, kind: row?.kind === 'restore' ? 'restore' : 'call', restoreBefore: item.before, heldIn: item.gen };
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
  });
  // Rows no group took: history has not captured them (review R29 M2).
  const taken = new Set(groups.flatMap((g) => g.rows));
  const writes = order.filter((r, ri) => !taken.has(ri) && r.kind !== 'upkeep').length;
  return {
    database: id,
    entries,
    ...(more && picked.length ? { next: idOf(picked.at(-1)!) } : {}),
    ...(writes ? { behind: { writes, note: behindNote(writes) } } : {}),
  };
}

/** {@link plainPage} with its positions marked with their database, as the list gives them out (and takes them back). */
export async function wholeHistoryPage(
  dataDir: string,
  id: string,
  rows: ActivityRows,
  opts: { limit?: number; before?: string } = {},
  now = Date.now(),
): Promise<ActivityPage> {
  const page = await plainPage(dataDir, id, rows, { ...opts, ...(opts.before !== undefined ? { before: positionIn(id, opts.before) } : {}) }, now);
  return {
    ...page,
    entries: page.entries.map((e) => ({ ...e, id: positionToken(id, e.id), restoreBefore: positionToken(id, e.restoreBefore) })),
    ...(page.next !== undefined ? { next: positionToken(id, page.next) } : {}),
  };
}
