import { historyDir, listGenerations, listSegments, listUndoPoints, localSource } from './layout.ts';
import { readIndex } from './segment-index.ts';

/** One generation as `agentdb history` and `GET /v1/databases/:db/history` show it. */
export interface GenerationView {
  id: string;
  startedAt: string;
  endedAt: string | null;
  snapshotAt: string;
  commits: number;
  reason: string;
  /** A segment index with a damaged line (restores that need it answer HISTORY_CORRUPT): which, and why. Commits after it are not counted. */
  damaged?: string;
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
   * The last {@link RECENT_COMMITS} commits' times (oldest first) and generations: the moments
   * to restore to when undoing an agent's last writes (`--at` a time keeps every commit at or
   * before it), rather than guessing with dry runs.
   */
  recentCommits: { at: string; generation: string }[];
}

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
  const recent: { at: number; generation: string }[] = [];
  const generations = gens.map((g) => {
    let commits = 0;
    let last = g.snapshot!.at;
    let damaged: string | undefined;
    for (const seg of listSegments(g)) {
      const index = readIndex(seg.indexPath);
      const c = index.commits;
      if (index.damaged) damaged ??= `segment ${seg.name}, ${index.damaged}`;
      // The base commit of a restore's generation is its starting state, not a commit.
      const base = g.snapshot!.base?.segment === seg.name ? 1 : 0;
      commits += c.length - base;
      for (const r of c.slice(Math.max(base, c.length - RECENT_COMMITS))) recent.push({ at: r.at, generation: g.name });
      recent.splice(0, Math.max(0, recent.length - RECENT_COMMITS));
      if (c.length) last = Math.max(last, c.at(-1)!.at);
    }
    latest = Math.max(latest ?? 0, last);
    return { id: g.name, startedAt: iso(g.snapshot!.at), endedAt: g.end ? iso(g.end.endedAt) : null, snapshotAt: iso(g.snapshot!.at), commits, reason: g.snapshot!.reason, ...(damaged ? { damaged } : {}) };
  });
  const floor = now - retentionDays * 24 * 3600 * 1000;
  const first = gens[0]?.snapshot?.at;
  return {
    database: id,
    earliest: first === undefined ? null : iso(Math.max(first, floor)),
    latest: latest === undefined ? null : iso(latest),
    generations,
    undoPoints: listUndoPoints(historyDir(dataDir, id)).map((u) => ({ id: u.id, createdAt: iso(u.createdAt), restoredTo: iso(u.restoredTo) })),
    recentCommits: recent.filter((r) => r.at >= floor).map((r) => ({ at: iso(r.at), generation: r.generation })),
  };
}
