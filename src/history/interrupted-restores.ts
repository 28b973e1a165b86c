import { landedAt } from './delta-restore.ts';
import {
  listGenerations,
  listSegments,
  listUndoPoints,
  undoPath,
  writeJsonAtomic,
  type HistoryPosition,
  type HistorySource,
  type UndoPoint,
} from './history-files.ts';
import { readCommits } from './segment-index.ts';
import type { DbTarget } from '../sqlite/db-target.ts';
import type { HandleCache } from '../sqlite/handle-cache.ts';
import type { HistoryCapture } from './handle-capture.ts';
import { audit, audited, type RestoreActor } from './restore-audit.ts';

/**
 * Settles the interrupted restores within the generation (undo points still `pending`). One
 * whose commit landed is done: its audit row is recorded if missing, and where its own commit
 * ends (what its undo discards after). When it is the same request again (`key`) and nothing
 * was committed since but its own audit row, that is its answer (`finished`, the database is
 * exactly the restored one). When agents wrote to the restored database meanwhile, it is
 * recorded as interrupted and the request runs anew, under a new undo id that leads back to
 * those writes (restoring again under the old one discarded them with no undo leading back,
 * its dry run saying it discards none). The same request whose commit never landed runs again
 * under the same undo id (`reuse`). Either way none is pending after.
 */
export function settleInterrupted(
  handles: HandleCache,
  history: HistoryCapture,
  db: DbTarget,
  source: HistorySource,
  hdir: string,
  key: string,
): { reuse?: string; finished?: string } {
  const out: { reuse?: string; finished?: string } = {};
  for (const point of listUndoPoints(hdir)) {
    const { pending } = point;
    if (!pending) continue;
    let same = pending.key === key && out.reuse === undefined && out.finished === undefined;
    const landed = landedAt(source, Buffer.from(pending.salts, 'hex'));
    if (!landed) {
      if (same) {
        out.reuse = point.id;
        continue;
      }
      writeJsonAtomic(undoPath(hdir, point.id), withoutPending(point));
      continue;
    }
    const live = handles.open(db, 'write');
    history.run(live, db);
    const hasRow = audited(live, point.id);
    // Its own audit row is the one commit allowed after it.
    if (same && commitsSince(source, landed) > (hasRow ? 1 : 0)) same = false;
    if (!hasRow) {
      audit(live, pending.by as RestoreActor, point.id, same ? pending.audited : `${pending.audited} (interrupted before it answered)`, Date.now());
      history.run(live, db);
    }
    writeJsonAtomic(undoPath(hdir, point.id), { ...withoutPending(point), restoreEnd: point.restoreEnd ?? landed });
    if (same) out.finished = point.id;
  }
  return out;
}

/** The commits history holds after position `pos` (a later generation counts as changes: a snapshot of a gap, or a restore's). */
function commitsSince(source: HistorySource, pos: HistoryPosition): number {
  let n = 0;
  for (const gen of listGenerations(source)) {
    if (gen.name < pos.generation) continue;
    if (gen.name > pos.generation) n++;
    for (const seg of listSegments(gen)) {
      const commits = readCommits(seg.indexPath, seg.closed);
      if (gen.name > pos.generation || seg.name > pos.segment) n += commits.length;
      else if (seg.name === pos.segment) n += commits.filter((c) => c.frames > pos.frames).length;
    }
  }
  return n;
}

/** The undo point as it stays once its restore is done. */
export function withoutPending(point: UndoPoint): UndoPoint {
  const { pending: _done, ...rest } = point;
  return rest;
}
