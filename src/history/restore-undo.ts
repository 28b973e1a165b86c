import { listGenerations, listSegments, readJson, undoPath, writeJsonAtomic, type localSource, type UndoPoint } from './history-files.ts';
import { withoutPending } from './interrupted-restores.ts';
import { readCommits } from './segment-index.ts';

// An in-place restore's undo point, seen from the restore: what undoing it would discard, and
// marking it finished once an interrupted restore completes under it.

/**
 * The commits made after the in-place restore `point` undoes: an undo of it discards them; it
 * says how many so nobody loses acknowledged writes unawares. A restore within the generation
 * recorded where its own commits ended (`restoreEnd`); one that copied a file in began a
 * generation, so the commits of the generations begun at or after it are the ones.
 */
export function commitsAfterRestore(source: ReturnType<typeof localSource>, point: UndoPoint): number {
  const end = point.restoreEnd;
  let n = 0;
  for (const gen of listGenerations(source)) {
    if (end ? gen.name < end.generation : !gen.snapshot || gen.snapshot.at < point.createdAt) continue;
    for (const seg of listSegments(gen)) {
      // A generation's base commit is the restore that began it, not a commit made after one.
      const commits = readCommits(seg.indexPath, seg.closed).slice(gen.snapshot?.base?.segment === seg.name ? 1 : 0);
      if (!end || gen.name > end.generation || seg.name > end.segment) n += commits.length;
      else if (seg.name === end.segment) n += commits.filter((c) => c.frames > end.frames).length;
    }
  }
  return n;
}

/** An interrupted restore asked again and finished under its undo id: its undo point is no longer pending. */
export function finishedUnder(hdir: string, undoId: string): void {
  const point = readJson<UndoPoint>(undoPath(hdir, undoId));
  if (point) writeJsonAtomic(undoPath(hdir, undoId), withoutPending(point));
}
