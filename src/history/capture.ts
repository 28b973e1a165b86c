import type { Database } from 'better-sqlite3';
import { noteAnswered, readAnswered, type Answered } from './answered-commits.ts';
import { beginCapture, endCapture, finished, lastCapture, othersQuiet, walDeleted, walDeletedError } from './capture-connection.ts';
import { readWalIndex } from './wal-index.ts';
import { dropState, loadState } from './capture-state.ts';
import { copyNew, type Found } from './copy-new.ts';
import type { HistoryPosition, HistorySource, SnapshotMeta } from './history-files.ts';
import { lateAnswers, noteLate } from './late-answers.ts';
import { markRestoreLeaving, unmarkRestoreLeaving } from './seal.ts';
import { syncSegment } from './segment-sync.ts';
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
    const noted = locked.noted;
    const stamp = {
      now,
      recover,
      answered: locked.prior,
      ...(noted ? { lastFrame: noted.frame, committed: { salt1: noted.salt1, salt2: noted.salt2, lastFrame: noted.frame, c1: noted.c1, c2: noted.c2 } } : {}),
    };
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
  if (walDeleted(db)) {
    if (found.next && locked.noted) noteLate(dbPath, locked.noted);
    throw walDeletedError(dbPath);
  }
  if (found.next) return newGeneration(db, dbPath, opts, found.next, now, found.lost);
  const report = found.report;
  if (found.checkpoint) {
    // Only when every committed frame is copied; the next commit starts the WAL over with
    // salt-1 + 1. RESTART, not TRUNCATE: the file is written over in place, never regrown.
    syncSegment(found.state?.seg);
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

/** Begins a generation from the file; `lost`: see `SnapshotMeta.lost`. Also for a copy before close (capture-on-close.ts). */
export function newGeneration(db: Database, dbPath: string, opts: CaptureOptions, reason: 'first' | 'gap', now: number, lost = false): CaptureReport {
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
