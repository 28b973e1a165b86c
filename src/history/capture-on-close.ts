import fs from 'node:fs';
import path from 'node:path';
import type { Database } from 'better-sqlite3';
import { type CaptureOptions, newGeneration } from './capture.ts';
import { beginCapture, closeWal, endCapture, lastCapture, othersQuiet, walDeleted, walDeletedError } from './capture-connection.ts';
import { closeSegment } from './capture-segment.ts';
import { stateOf, states } from './capture-state.ts';
import { copyNew, type Found } from './copy-new.ts';
import { SEGMENT_INDEX_EXT, SEGMENTS_DIR, type HistorySource } from './history-files.ts';
import { lateAnswers } from './late-answers.ts';
import { newestGeneration, newestSegment } from './newest-history.ts';
import { restoreLeaving, sealHolds, writeSeal } from './seal.ts';
import { readIndex } from './segment-index.ts';
import { syncSegment } from './segment-sync.ts';

// A handle's close, and the seal it leaves: the copy before it, whether it may be skipped, and
// the seal after it, which lets the next WAL's new salts continue the generation.

/** What {@link captureBeforeClose} hands to {@link sealAfterClose}. */
export interface PendingSeal {
  genDir: string;
  segment: string;
  frames: number;
}

/**
 * Capture before a handle closes, for whichever child closes it: copies what the WAL holds
 * beyond the history and keeps the write lock, so closing (which rolls back and, as the last
 * connection, checkpoints) lets no commit in between. The caller closes the handle, then calls
 * {@link sealAfterClose}. Waits for the lock as long as the connection's busy timeout, and throws
 * when it cannot have it (the handle then stays open, see `HandleCache`): closing without the
 * copy was safe only while the connection holding the lock stayed open, and a child whose worker
 * was killed closed so just as its sibling, holding the lock to copy, exited with the copy failed
 * (a full disk): the close was the last, and checkpointed away frames history never had (review
 * R3). The holder is another child's write or capture, a few milliseconds.
 */
export function captureBeforeClose(db: Database, dbPath: string, opts: CaptureOptions): PendingSeal | undefined {
  try {
    return copyBeforeClose(db, dbPath, opts);
  } finally {
    // The handle closes: its WAL's and its segment's files too (a child may hold many states, few handles).
    closeWal(db);
    closeSegment(states.get(dbPath)?.seg);
  }
}

function copyBeforeClose(db: Database, dbPath: string, opts: CaptureOptions): PendingSeal | undefined {
  const last = lastCapture(db);
  const lock = beginCapture(db, true)!;
  const now = (opts.now ?? Date.now)();
  let found: Found;
  try {
    // Another connection's commits since this one's last capture, for `unsure` alone: the WAL
    // started over at close is no sign of missed commits (another child's write, answered and
    // killed before its copy, may have started it; its frames are all there to copy).
    const foreign = othersQuiet(db) ? undefined : last.capturedTo;
    found = copyNew(db, dbPath, opts, { now, recover: true, emptyOnly: true }, false, foreign);
    // The close would fold a WAL deleted under it into the file: the handle stays open instead.
    if (walDeleted(db)) throw walDeletedError(dbPath);
    // The close, as the last connection, checkpoints: see `syncSegment`. A failed flush keeps the handle open.
    if (!found.next) syncSegment(found.state?.seg);
  } catch (err) {
    endCapture(db, lock);
    throw err;
  }
  lateAnswers.delete(dbPath);
  if (found.next) {
    endCapture(db, lock);
    // The new generation's snapshot seals it.
    newGeneration(db, dbPath, opts, found.next, now, found.lost);
    return undefined;
  }
  if (lock === 'held' || !found.state || restoreLeaving(found.state.genDir)) return undefined;
  return { genDir: found.state.genDir, segment: found.state.seg?.name ?? '', frames: found.state.seg?.frames ?? 0 };
}

/**
 * Whether `dbPath`'s file is exactly history's last commit: the position this process last
 * captured to, or for a database it has not captured yet the end its history's files show, is
 * sealed, and the seal holds for the file (no program changed or replaced it since, no restore
 * is leaving the generation). With its WAL empty as well, a capture would copy nothing and begin
 * nothing, so a handle opened only to query may put it off (issue 31). False when the seal is
 * another position's (another child captured since), or the history's files want mending (an
 * index a crash cut short, or damaged): the caller captures.
 *
 * For a database this process has not captured, the files are read without the write lock
 * ({@link endOnDisk}): with many more databases than handles, most reads were a child's first of
 * their database, whose capture on open, copy before close and seal check after took 0.33 ms of
 * the miss's 0.81 ms in a child; this look and a close that copies nothing take about 0.15 ms.
 * A restore that crashed after its rename left its mark on the newest generation, and a seal
 * that no longer holds for the new file: either refuses here.
 */
export function sealedAsKnown(dbPath: string, source: HistorySource): boolean {
  const st = stateOf(dbPath);
  const end = st ? { genDir: st.genDir, segment: st.seg?.name ?? '', frames: st.seg?.frames ?? 0 } : endOnDisk(source);
  if (!end || restoreLeaving(end.genDir)) return false;
  return sealHolds(end.genDir, dbPath, end.segment, end.frames);
}

/**
 * Where history ends as its files show it — the newest generation, its newest segment and the
 * frames of that segment's last indexed commit, as `loadState` finds them — read without the
 * lock and without keeping a state: the generation's snapshot and the segment's header are not
 * read (a generation is published whole, by a rename, snapshot first). Cold in the kernel's
 * caches, as most databases are with 100,000 of them, each file read is a read of the disk:
 * loading the state read two more, and the look on open took 0.51-0.57 ms with no file cached,
 * against 0.32-0.36 ms this way (0.14 against 0.10 ms cached).
 * Undefined when there is no history, or its last index wants mending (a line a crash cut short,
 * or damage): a capture must look.
 */
function endOnDisk(source: HistorySource): { genDir: string; segment: string; frames: number } | undefined {
  const genName = newestGeneration(source.generationsDir);
  if (!genName) return undefined;
  const genDir = path.join(source.generationsDir, genName);
  const segment = newestSegment(genDir);
  if (!segment) return { genDir, segment: '', frames: 0 };
  const index = readIndex(path.join(genDir, SEGMENTS_DIR, segment + SEGMENT_INDEX_EXT));
  if (index.damaged !== undefined || index.tail !== 'none' || index.goodBytes < index.bytes) return undefined;
  return { genDir, segment, frames: index.commits.at(-1)?.frames ?? 0 };
}

/**
 * Whether closing `db` now leaves its file exactly as it is, so history has nothing to copy nor
 * seal: its WAL is empty, and the write lock, taken without waiting, is kept for the close so no
 * commit can land in between (closing rolls it back). Then even as the last connection, the close
 * checkpoints nothing. False otherwise (the lock released): the caller captures as ever. For a
 * handle that was only queried, whose copy on open was never run (`HandleCache`'s `query`): a
 * miss with many databases paid a copy on open and one before close for nothing (issue 31).
 */
export function closesUnchanged(db: Database, dbPath: string): boolean {
  const lock = beginCapture(db, false);
  if (!lock) return false;
  if (lock === 'began' && (fs.statSync(`${dbPath}-wal`, { throwIfNoEntry: false })?.size ?? 0) === 0) return true;
  endCapture(db, lock);
  return false;
}

/**
 * After the handle of {@link captureBeforeClose} closed: when its close was the last (the WAL is
 * gone, so it checkpointed every frame, all of them captured), the file now is exactly the
 * history's last commit, and the generation is sealed so the next WAL's new salts continue it.
 */
export function sealAfterClose(dbPath: string, pending: PendingSeal | undefined): void {
  if (!pending || fs.existsSync(`${dbPath}-wal`)) return;
  // A read-only open and close leaves the file as sealed: writing the same seal again (a file
  // written and renamed) was most of what a handle cache miss cost with many databases.
  if (sealHolds(pending.genDir, dbPath, pending.segment, pending.frames)) return;
  writeSeal(pending.genDir, dbPath, pending.segment, pending.frames);
}
