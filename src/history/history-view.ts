import fs from 'node:fs';
import { historyDir, listGenerations, listSegments, listUndoPoints, localSource } from './history-files.ts';
import { lostStretches } from './restore-plan.ts';
import { readIndex } from './segment-index.ts';
import { frameOffset } from './wal-format.ts';
import type { ActivityEntry } from './activity-view.ts';
import { positionToken } from './position-token.ts';

/** One generation as `agentdb history` and `GET /v1/databases/:db/history` show it. */
export interface GenerationView {
  id: string;
  startedAt: string;
  endedAt: string | null;
  snapshotAt: string;
  commits: number;
  reason: string;
  /**
   * A segment index with a damaged line, or a segment shorter than its index says (restores that
   * need it answer HISTORY_CORRUPT): which, and why. Commits after it are not counted.
   */
  damaged?: string;
}

/**
 * A stretch whose commits history lost (restores to a moment in it answer HISTORY_LOST): after
 * the last commit history holds, before the snapshot of the `gap` generation that followed.
 */
export interface LostView {
  after: string;
  before: string;
  generation: string;
}

/** A database's restorable history (the HTTP contract of `GET /v1/databases/:db/history`). */
export interface HistoryView {
  database: string;
  /** The earliest and latest moments a restore can reach (ISO), or null with no history. */
  earliest: string | null;
  latest: string | null;
  generations: GenerationView[];
  undoPoints: { id: string; createdAt: string; restoredTo: string }[];
  /**
   * The last {@link RECENT_COMMITS} commits of the database's users (calls, restores, writes from
   * outside agentdb; not agentdb's own upkeep), newest first as the activity list (review R1
   * low: oldest first, it read backwards beside it), with their times, generations and
   * history positions: the moments to restore to when undoing an agent's last writes (`--at` a
   * time keeps every commit at or before it, `--through` a position every commit up to it),
   * rather than guessing with dry runs. Every commit, upkeep too, when asked for all.
   */
  recentCommits: RecentCommit[];
  /**
   * Why `recentCommits` is empty when the history holds commits (its activity past the list's read
   * limit, or unreadable), or that writes answered ok are not yet in history (history is behind).
   */
  recentNote?: string;
  /** Stretches no restore can reach: their commits never reached history. Empty when none. */
  lost: LostView[];
}

/** A commit of {@link HistoryView.recentCommits}. */
export interface RecentCommit {
  at: string;
  generation: string;
  /** Its history position, for a restore `--through` it (the state just after it). */
  position: string;
}

/** Which commits {@link HistoryView.recentCommits} lists: the users' (`user`), every one (`all`), or none (not asked). */
export type RecentKind = 'user' | 'all' | 'none';

/** Commits {@link HistoryView.recentCommits} lists. */
export const RECENT_COMMITS = 20;

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * What database `id`'s local history holds: its generations (oldest first) with their commit
 * counts, the restorable range, and its undo points. `retentionDays` bounds `earliest` as
 * restores do (a snapshot older than the window is kept only as the base of later commits).
 */
export function historyView(dataDir: string, id: string, retentionDays: number, now = Date.now()): HistoryView {
  const gens = listGenerations(localSource(dataDir, id)).filter((g) => g.snapshot);
  let latest: number | undefined;
  const recent: { at: number; generation: string; position: string }[] = [];
  const lastAt = new Map<string, number>();
  const generations = gens.map((g) => {
    let commits = 0;
    let last = g.snapshot!.at;
    let damaged: string | undefined;
    for (const seg of listSegments(g)) {
      const index = readIndex(seg.indexPath);
      const c = index.commits;
      if (index.damaged) damaged ??= `segment ${seg.name}, ${index.damaged}`;
      // Frames its index names that the file lacks (a copy torn by a full disk before issue 25's fix).
      const lastFrames = c.at(-1)?.frames ?? 0;
      if (lastFrames > 0 && (fs.statSync(seg.dataPath, { throwIfNoEntry: false })?.size ?? 0) < frameOffset(g.snapshot!.pageSize, lastFrames + 1)) {
        damaged ??= `segment ${seg.name} is shorter than its index says`;
      }
      // The base commit of a restore's generation is its starting state, not a commit.
      const base = g.snapshot!.base?.segment === seg.name ? 1 : 0;
      commits += c.length - base;
      for (let n = Math.max(base, c.length - RECENT_COMMITS); n < c.length; n++)
        recent.push({ at: c[n]!.at, generation: g.name, position: positionToken(id, `${g.name}.${seg.name}.${n}`) });
      recent.splice(0, Math.max(0, recent.length - RECENT_COMMITS));
      if (c.length) last = Math.max(last, c.at(-1)!.at);
    }
    latest = Math.max(latest ?? 0, last);
    lastAt.set(g.name, last);
    return {
      id: g.name,
      startedAt: iso(g.snapshot!.at),
      endedAt: g.end ? iso(g.end.endedAt) : null,
      snapshotAt: iso(g.snapshot!.at),
      commits,
      reason: g.snapshot!.reason,
      ...(damaged ? { damaged } : {}),
    };
  });
  const floor = now - retentionDays * 24 * 3600 * 1000;
  const first = gens[0]?.snapshot?.at;
  return {
    database: id,
    earliest: first === undefined ? null : iso(Math.max(first, floor)),
    latest: latest === undefined ? null : iso(latest),
    generations,
    undoPoints: listUndoPoints(historyDir(dataDir, id)).map((u) => ({ id: u.id, createdAt: iso(u.createdAt), restoredTo: iso(u.restoredTo) })),
    recentCommits: recent
      .filter((r) => r.at >= floor)
      .map((r) => ({ at: iso(r.at), generation: r.generation, position: r.position }))
      .reverse(),
    lost: lostStretches(gens, (g) => lastAt.get(g.name) ?? g.snapshot!.at).map((l) => ({
      after: iso(l.after),
      before: iso(l.before),
      generation: l.generation,
    })),
  };
}

/**
 * The users' last commits, from a page of the activity list (newest first, agentdb's upkeep left
 * out): those of {@link HistoryView.recentCommits}, newest first, inside the window that starts
 * at `floor`. A gap, and the calls its snapshot holds, are no commit of their own.
 */
export function userRecentCommits(entries: readonly Pick<ActivityEntry, 'id' | 'at' | 'kind' | 'heldIn'>[], floor: number): RecentCommit[] {
  return (
    entries
      .filter((e) => e.kind !== 'gap' && e.heldIn === undefined && Date.parse(e.at) >= floor)
      .slice(0, RECENT_COMMITS)
      // An entry's id is its position, marked with its database already.
      .map((e) => ({ at: e.at, generation: e.id.split('.')[0]!, position: e.id }))
  );
}
