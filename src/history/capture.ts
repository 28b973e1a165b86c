import fs from 'node:fs';
import path from 'node:path';
import type { Database } from 'better-sqlite3';
import { noteAnswered, readAnswered, type Answered } from './answered-commits.ts';
import { beginCapture, closeWal, endCapture, finished, lastCapture, othersQuiet } from './capture-connection.ts';
import { readWalIndex } from './wal-index.ts';
import { closeSegment } from './capture-segment.ts';
import { dropState, loadState, stateOf, states } from './capture-state.ts';
import { newestGeneration, newestSegment } from './newest-history.ts';
import { readIndex } from './segment-index.ts';
import { copyNew, type Found } from './copy-new.ts';
import { SEGMENT_INDEX_EXT, SEGMENTS_DIR, type HistoryPosition, type HistorySource, type SnapshotMeta } from './history-files.ts';
import { lateAnswers, noteLate } from './late-answers.ts';
import { markRestoreLeaving, restoreLeaving, sealHolds, unmarkRestoreLeaving, writeSeal } from './seal.ts';
import { startGeneration } from './snapshot.ts';

/** What capture needs to know: where the database and its history are, and when to checkpoint. */
export interface CaptureOptions {
  source: HistorySource;
  /** Checkpoint (TRUNCATE) once the live WAL passes this many bytes, after copying it. */
  checkpointBytes: number;
  now?: () => number;
}

/** What one capture did. */
export interface CaptureReport {
  commits: number;
  frames: number;
  /** A generation began (first capture, or a gap: the WAL was reset behind capture's back). */
  generation?: SnapshotMeta['reason'];
  checkpointed: boolean;
}

/**
 * Copies what the live WAL of `dbPath` holds beyond what its history has — every frame up to
 * the last commit frame, checksums and salts checked — into the current segment, with one index
 * line per commit and the time now; then checkpoints if the WAL has grown past
 * `checkpointBytes`. Runs after every commit and when a handle opens (a crash between commit and
 * copy loses nothing). A database with no history yet, or whose WAL was reset without capture
 * (a gap), starts a new generation.
 *
 * The copy runs under the database's write lock (`BEGIN IMMEDIATE`, then rolled back): the
 * child that runs a database's statements captures after each commit, but another child may
 * close an old handle of the same database at that moment and capture before closing, and two
 * captures at once would write the same frames twice. The lock costs a few microseconds.
 */
export function capture(db: Database, dbPath: string, opts: CaptureOptions): CaptureReport {
  return finishCapture(lockForCapture(db, dbPath, opts));
}

/** A capture with the write lock taken, to finish with {@link finishCapture}. */
export interface LockedCapture {
  db: Database;
  dbPath: string;
  opts: CaptureOptions;
  now: number;
  last: ReturnType<typeof lastCapture>;
  lock: 'began' | 'held';
  /** Taken right after this connection's commit, to answer it before the copy (see `noteAnswered`). */
  answering: boolean;
  /** The WAL has grown past `checkpointBytes`: the copy checkpoints, so it goes before the answer. */
  due: boolean;
  /** No other connection committed since this connection's last capture (`othersQuiet`). */
  quiet: boolean;
  /** The record {@link noteAnswered} wrote over, when another connection committed since. */
  prior?: Answered;
  /** The record {@link noteAnswered} wrote for this commit: kept should the copy fail (see {@link lateAnswers}). */
  noted?: Answered;
  /**
   * The WAL index's count of commits as {@link noteAnswered} read it: under the lock it is still
   * the count once the copy is done, which read it again (a system call per write, issue 31).
   */
  change?: number;
}

/**
 * The first half of {@link capture}: takes the write lock and the time. From here until
 * {@link finishCapture} nothing can commit to the database or start its WAL over (a checkpoint
 * that would needs the lock), so the commit just made can be answered before its frames are
 * copied: they stay where they are, and are recorded with this time.
 */
export function lockForCapture(db: Database, dbPath: string, opts: CaptureOptions, answering = false): LockedCapture {
  const last = lastCapture(db);
  const lock = beginCapture(db, true)!;
  // Once the lock is held: a commit another connection slipped in while this one waited for it
  // took place before this time, never after.
  const now = (opts.now ?? Date.now)();
  const quiet = othersQuiet(db);
  // Another connection committed since this one's last capture: one of them may be a write
  // answered by a child killed before its copy, whose record the note below writes over.
  const prior = answering && !quiet ? readAnswered(opts.source) : undefined;
  const answered = answering ? noteAnswered(db, dbPath, opts.source, now) : undefined;
  const walBytes = answered?.walBytes;
  return {
    db,
    dbPath,
    opts,
    now,
    last,
    lock,
    quiet,
    answering,
    prior,
    ...(answered ? { noted: answered.noted, change: answered.change } : {}),
    due: walBytes === undefined || walBytes >= opts.checkpointBytes,
  };
}

/** The second half of {@link capture}: copies what {@link lockForCapture} holds still, and lets the lock go. */
export function finishCapture(locked: LockedCapture): CaptureReport {
  const { db, dbPath, opts, now, last, lock, quiet } = locked;
  let found: Found;
  try {
    // Another connection committed, and nothing was captured since this connection's last
    // capture: a program outside agentdb (or a capture that failed). See `copyNew`.
    const foreign = quiet ? undefined : last.capturedTo;
    // A copy of this connection's own commit, just answered, stamps it with its own time; any
    // other may find a commit answered by a child killed before its copy (`noteAnswered`). So
    // may a commit's copy when this connection's last copy failed or another connection committed
    // since: the frames past history may be a killed child's answered commits, their times in the
    // answered file alone (`prior` is only its last record). Stamped with this copy's time, a
    // restore to a moment in between left them out, silently (review R4: the next owner's copy on
    // open failed on a full disk, room came back, and its next write's copy took them along).
    const recover = !locked.answering || !quiet || !last.finished;
    const stamp = { now, recover, answered: locked.prior, ...(locked.noted ? { lastFrame: locked.noted.frame } : {}) };
    found = copyNew(db, dbPath, opts, stamp, quiet && last.finished, foreign);
    finished(db, found.state, locked.change ?? readWalIndex(db, dbPath)?.change);
  } catch (err) {
    if (locked.noted) noteLate(dbPath, locked.noted);
    throw err;
  } finally {
    endCapture(db, lock);
  }
  // Copied up to the WAL's last commit (or a generation begins): nothing answered is waiting.
  lateAnswers.delete(dbPath);
  if (found.next) return newGeneration(db, dbPath, opts, found.next, now, found.lost);
  const report = found.report;
  if (found.checkpoint) {
    // Only when every committed frame is copied; the next commit starts the WAL over with
    // salt-1 + 1. RESTART, not TRUNCATE: the file is written over in place, never regrown.
    const [res] = db.pragma('wal_checkpoint(RESTART)') as { busy: number; log: number }[];
    report.checkpointed = !res?.busy;
    // The checkpoint cannot run under the write lock: a commit from another connection (a
    // program outside agentdb) that landed since the copy is in the WAL beyond what was copied,
    // folded into the file by it, and the next commit writes over its frames with salt-1 + 1,
    // which reads as this generation going on. History would miss it: start over from the file.
    if (res && res.log > (found.state?.seg?.frames ?? 0)) {
      // Marked first, as a restore marks the generation it leaves: should the new generation
      // fail to begin (a reader keeps its checkpoint from completing), the next capture still
      // sees the gap instead of taking the restarted WAL as this generation going on.
      const leaving = found.state?.genDir;
      if (leaving) markRestoreLeaving(leaving);
      // Commits of another program, folded into the file uncaptured: lost, whatever the mark says.
      const began = newGeneration(db, dbPath, opts, 'gap', now, true);
      if (leaving) unmarkRestoreLeaving(leaving);
      return began;
    }
  }
  return report;
}

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

/** Begins a generation from the file; `lost`: see `SnapshotMeta.lost`. */
function newGeneration(db: Database, dbPath: string, opts: CaptureOptions, reason: 'first' | 'gap', now: number, lost = false): CaptureReport {
  try {
    startGeneration(db, dbPath, opts.source, reason, now, undefined, undefined, lost);
  } finally {
    dropState(dbPath);
  }
  return { commits: 0, frames: 0, checkpointed: false, generation: reason };
}

/** The last commit captured: where an undo goes back to. Undefined with no history. */
export function capturedPosition(dbPath: string, source: HistorySource): HistoryPosition | undefined {
  // Restores and snapshots decide by it: the files in full, not the one-fstat look of a commit's capture.
  const st = loadState(dbPath, source, false);
  if (!st) return undefined;
  return { generation: st.genName, segment: st.seg?.name ?? '', frames: st.seg?.frames ?? 0 };
}

/** Forgets what this process knew of a database's capture (its files changed wholesale). */
export function forgetCapture(dbPath: string): void {
  dropState(dbPath);
}
