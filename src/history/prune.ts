import fs from 'node:fs';
import path from 'node:path';
import { historyDatabases, historyDir, listGenerations, listUndoPoints, localSource, undoPath } from './history-files.ts';
import { activeReaders } from './reader-markers.ts';

/** What one prune of local history removed. */
export interface HistoryPruneReport {
  databases: number;
  generations: number;
  undoPoints: number;
  bytes: number;
  /** Databases left alone because a restore was reading their history. */
  skipped: number;
}

const DAY_MS = 24 * 3600 * 1000;

/**
 * Deletes local history older than `retentionDays`: every generation that ended before the
 * window began, except the newest one that began at or before it — its snapshot is what
 * restores to the window's first moments start from — and never the current one; and undo
 * points older than the window. A database whose history a restore reads now (a live reader
 * marker) is left for the next run: Litestream's users' worst reports are restores that failed
 * because retention deleted files beneath them.
 */
export function pruneHistory(dataDir: string, opts: { now: number; retentionDays: number }): HistoryPruneReport {
  const cutoff = opts.now - opts.retentionDays * DAY_MS;
  const report: HistoryPruneReport = { databases: 0, generations: 0, undoPoints: 0, bytes: 0, skipped: 0 };
  for (const id of historyDatabases(dataDir)) {
    report.databases++;
    const dir = historyDir(dataDir, id);
    if (activeReaders(dir).length) {
      report.skipped++;
      continue;
    }
    const gens = listGenerations(localSource(dataDir, id)).filter((g) => g.snapshot);
    // The base of the window: the newest generation whose snapshot is at or before the cutoff.
    let base = -1;
    gens.forEach((g, i) => {
      if (g.snapshot!.at <= cutoff) base = i;
    });
    for (const g of gens.slice(0, Math.max(0, base))) {
      if (g.current) continue;
      report.bytes += folderBytes(g.dir);
      // Renamed first, so a listing never sees half a generation.
      const doomed = `${g.dir}.pruned`;
      fs.renameSync(g.dir, doomed);
      fs.rmSync(doomed, { recursive: true, force: true });
      report.generations++;
    }
    for (const u of listUndoPoints(dir)) {
      if (u.createdAt >= cutoff) continue;
      fs.rmSync(undoPath(dir, u.id), { force: true });
      report.undoPoints++;
    }
  }
  return report;
}

function folderBytes(dir: string): number {
  let total = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    total += entry.isDirectory() ? folderBytes(p) : fs.statSync(p).size;
  }
  return total;
}
