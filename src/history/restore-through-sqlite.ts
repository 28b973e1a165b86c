import fs from 'node:fs';
import path from 'node:path';
import { foreseeHeader, type Rebuilt } from './adopt-rebuilt.ts';
import { capture, capturedPosition, forgetCapture } from './capture.ts';
import { type localSource, undoPath, writeJsonAtomic, type UndoPoint } from './history-files.ts';
import type { RestoreInPlaceRequest as RestoreReq } from './restore-requests.ts';
import { markRestoreLeaving, unmarkRestoreLeaving } from './seal.ts';
import { startGeneration } from './snapshot.ts';
import { swapIn } from './swap-in.ts';
import { AgentDbError } from '../errors.ts';
import type { HandleCache } from '../sqlite/handle-cache.ts';
import { diskIsFull } from '../sqlite/sqlite-errors.ts';
import { cutUncommittedTail } from './uncommitted-tail.ts';
import { generationLater } from './restore-result.ts';
import type { HistoryCapture } from './handle-capture.ts';

/**
 * The restore in place when another connection has the live file open: the rebuilt pages are
 * copied over the live database with SQLite's backup API, as one commit (which other
 * connections see like any other), and a new generation begun from the rebuilt file. Returns a
 * note when the restore is in but its generation could not be begun (see `generationLater`).
 */
export function throughSqlite(
  handles: HandleCache,
  history: HistoryCapture,
  req: RestoreReq,
  tmp: string,
  point: UndoPoint,
  hdir: string,
  source: ReturnType<typeof localSource>,
  reused: boolean,
): string | undefined {
  const live = handles.open(req.db, 'write');
  history.run(live, req.db);
  // Captured up to the last commit and checkpointed (capture's own rule: only once all is
  // copied), or with an empty WAL, the live header is in the file: the one the swap leaves can be
  // foreseen, and the new snapshot hashed on the other core while SQLite copies it in.
  const ready = capture(live, req.db.path, { source, checkpointBytes: 0 });
  const walEmpty = (fs.statSync(`${req.db.path}-wal`, { throwIfNoEntry: false })?.size ?? 0) === 0;
  const foreseen = ready.checkpointed || walEmpty ? foreseeHeader(live, req.db.path, tmp) : undefined;
  point.position = capturedPosition(req.db.path, source) ?? point.position;
  if (!reused) writeJsonAtomic(undoPath(hdir, point.id), point);
  const leaving = path.join(source.generationsDir, point.position.generation);
  markRestoreLeaving(leaving);
  try {
    swapIn(tmp, req.db.path);
  } catch (err) {
    // Whether the disk is full is asked first: the cut below gives room back.
    const full = diskIsFull(req.db.path);
    // The backup is one transaction: nothing changed, so there is nothing to undo either. But on
    // a full disk SQLite can write its every frame, the commit's too, and fail to enter them in
    // the WAL index (the -shm cannot grow past 4,062 frames: SQLITE_IOERR_SHMSIZE): a connection
    // recovering the WAL later (every one closed, or killed) would find the restore committed
    // after all. Cut back to the index's end, as a write's failed commit is (session 35, F14).
    cutUncommittedTail(live, req.db.path);
    if (!reused) fs.rmSync(undoPath(hdir, point.id), { force: true });
    unmarkRestoreLeaving(leaving);
    // SQLite's "disk I/O error" there answered INTERNAL ("report it"), not retryable (F14).
    const code = String((err as { code?: unknown }).code);
    if (full && /^SQLITE_(IOERR|CANTOPEN|FULL)/.test(code)) {
      throw new AgentDbError('STORAGE_FULL', `${(err as Error).message} copying the restored database in (the disk is full): nothing was restored`);
    }
    throw err;
  }
  // The old generation ends at the undo point: the restore's 100 MB commit is no history, the
  // new generation begins from its result (the rebuilt file itself, checkpointed in). Until it
  // exists the mark above keeps capture from taking the live file as the old one.
  try {
    newGeneration(live, req.db.path, source, { file: tmp, foreseen });
  } catch (err) {
    // The restore is in: answered done with a note, the mark left for the next capture's gap
    // (thrown, it was answered STORAGE_FULL with the database restored: F17). The close copies
    // nothing here on a full disk and keeps the handle; the next open or close tries again.
    try {
      handles.evict(req.db.path);
    } catch {
      // Kept open: its statements are prepared again by SQLite against the new schema.
    }
    return generationLater(req.db.id, err);
  }
  unmarkRestoreLeaving(leaving);
  // Everything this child kept about the handle (prepared statements, tables known to exist,
  // the schema) belongs to the state before: close it (nothing is left to capture).
  handles.evict(req.db.path);
  return undefined;
}

/**
 * The generation a restore in place begins, from `rebuilt`, the file it copied in. Should that
 * fail (another connection kept the checkpoint from completing), the restore's commit is
 * captured like any other and the live file copied, as for a nightly snapshot; failing that
 * too, the old generation keeps its mark and the next capture begins one (a gap).
 */
function newGeneration(db: Parameters<typeof startGeneration>[0], dbPath: string, source: ReturnType<typeof localSource>, rebuilt: Rebuilt): void {
  try {
    startGeneration(db, dbPath, source, 'restore', Date.now(), rebuilt);
  } catch {
    forgetCapture(dbPath);
    capture(db, dbPath, { source, checkpointBytes: Number.MAX_SAFE_INTEGER });
    startGeneration(db, dbPath, source, 'restore', Date.now());
  } finally {
    forgetCapture(dbPath);
  }
}
