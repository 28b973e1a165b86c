import fs from 'node:fs';
import { capture, capturedPosition, forgetCapture } from './capture.ts';
import { historyDir, listGenerations, localSource, segmentName } from './history-files.ts';
import { activeReaders } from './reader-markers.ts';
import type { SnapshotRequest as SnapshotReq } from './restore-requests.ts';
import { dataVersion, startGeneration, type Follows } from './snapshot.ts';
import type { HandleCache } from '../sqlite/handle-cache.ts';
import type { HistoryCapture } from './handle-capture.ts';

/** A nightly (or operator's) snapshot: a new generation, when anything was committed since the last. */
export function snapshotNow(handles: HandleCache, history: HistoryCapture, dataDir: string, req: SnapshotReq): { snapshot?: string } {
  const db = handles.open(req.db, 'read');
  if (handles.isPlaceholder(db)) return {};
  // A copy that fails (a full disk) fails the snapshot here: history's position would then say
  // nothing was committed since the last snapshot while the WAL holds commits it lacks, and the
  // snapshot answered ok having taken nothing, so `backup now` said `unchanged` (review F2).
  history.copy(db, req.db);
  const source = localSource(dataDir, req.db.id);
  const pos = capturedPosition(req.db.path, source);
  // Nothing committed since the generation's snapshot: no segment yet, or only an empty first one.
  if (!pos || pos.segment === '' || (pos.frames === 0 && pos.segment === segmentName(1))) return {};
  // Nor since a restore began it: its base commit is its starting state, not a change.
  const base = listGenerations(source).at(-1)?.snapshot?.base;
  if (base && pos.segment === base.segment && pos.frames === base.frames) return {};
  // A restore reading this history would see its generation end under it: leave it for tonight.
  if (activeReaders(historyDir(dataDir, req.db.id)).length) return {};
  // Every frame copied and checkpointed first, so the new generation is known to continue this
  // one exactly. Another connection committing from here on (an outside program) is caught under
  // the snapshot's write lock by the data version, and the snapshot then follows nothing.
  // A copy that fails (a full disk) ends the snapshot: the snapshot's checkpoint would fold the
  // frames it could not copy into the file, and the moments they were committed at would be
  // lost to history (issue 25). They stay in the WAL for the next copy.
  let follows: Follows | undefined;
  const version = dataVersion(db);
  const done = capture(db, req.db.path, { source, checkpointBytes: 0 });
  const walEmpty = (fs.statSync(`${req.db.path}-wal`, { throwIfNoEntry: false })?.size ?? 0) === 0;
  const position = capturedPosition(req.db.path, source);
  if (!done.generation && (done.checkpointed || walEmpty) && position) follows = { position, dataVersion: version };
  const meta = startGeneration(db, req.db.path, source, req.reason, Date.now(), undefined, follows);
  forgetCapture(req.db.path);
  return { snapshot: meta.id };
}
