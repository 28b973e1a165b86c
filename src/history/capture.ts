import fs from 'node:fs';
import type { Database } from 'better-sqlite3';
import { noteAnswered, readAllAnswered, readAnswered, type Answered } from './answered-commits.ts';
import { beginCapture, closeWal, committedSince, endCapture, finished, lastCapture, othersQuiet, walOf } from './capture-connection.ts';
import { readWalIndex } from './wal-index.ts';
import { bumpStamp, closeSegment, dropState, loadState, newSegment, positionKey, segmentFds, stampOf, states, type Segment, type State } from './capture-state.ts';
import type { CommitRecord, HistoryPosition, HistorySource, SegmentHeader, SnapshotMeta } from './history-files.ts';
import { commitLine, readIndex } from './segment-index.ts';
import { allInNewWal } from './new-wal-commits.ts';
import { markRestoreLeaving, restoreLeaving, sealBroken, sealHolds, unmarkRestoreLeaving, writeSeal } from './seal.ts';
import { startGeneration } from './snapshot.ts';
import { WAL_HEADER_BYTES, checkFrame, frameBytes, frameOffset, parseWalHeader } from './wal-format.ts';

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
}

/**
 * Commits answered whose copy failed (a full disk), by database path, oldest first: when a later
 * copy finds their frames, they take the times they were answered at, not that copy's. Stamped
 * with the later time, a restore to a moment in between left out writes already answered
 * (issue 25). The answered record on disk keeps only the last; this process keeps each, up to
 * {@link MAX_LATE_ANSWERS} per database (past that, the oldest take the time of a later one).
 */
const lateAnswers = new Map<string, Map<number, Answered>>();
const MAX_LATE_ANSWERS = 100_000;

/** Keeps a commit answered whose copy failed, by its commit frame. */
function noteLate(dbPath: string, noted: Answered): void {
  let byFrame = lateAnswers.get(dbPath);
  if (!byFrame) lateAnswers.set(dbPath, (byFrame = new Map()));
  byFrame.set(noted.frame, noted);
  if (byFrame.size > MAX_LATE_ANSWERS) byFrame.delete(byFrame.keys().next().value!);
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
  return { db, dbPath, opts, now, last, lock, quiet, answering, prior, ...(answered ? { noted: answered.noted } : {}), due: walBytes === undefined || walBytes >= opts.checkpointBytes };
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
    // other may find a commit answered by a child killed before its copy (`noteAnswered`).
    found = copyNew(db, dbPath, opts, { now, recover: !locked.answering, answered: locked.prior }, quiet && last.finished, foreign);
    finished(db, found.state, readWalIndex(db, dbPath)?.change);
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
 * {@link sealAfterClose}. Does not wait: when another connection holds the write lock, the
 * database is in use elsewhere, and that connection's child captures it; nothing is sealed.
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
  const lock = beginCapture(db, false);
  if (!lock) return undefined;
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
 * After the handle of {@link captureBeforeClose} closed: when its close was the last (the WAL is
 * gone, so it checkpointed every frame, all of them captured), the file now is exactly the
 * history's last commit, and the generation is sealed so the next WAL's new salts continue it.
 */
export function sealAfterClose(dbPath: string, pending: PendingSeal | undefined): void {
  if (!pending || fs.existsSync(`${dbPath}-wal`)) return;
  writeSeal(pending.genDir, dbPath, pending.segment, pending.frames);
}

/**
 * What one capture goes by besides the files: the time it gives the commits it copies, the record
 * of a commit answered before a kill stopped its copy, and whether it runs before a close.
 */
interface Stamp {
  now: number;
  /** Look for a commit answered before a kill stopped its copy (`readAnswered`). */
  recover: boolean;
  answered?: Answered;
  /** Before a close: another connection's commits mean a gap only with the WAL empty (see `copyBeforeClose`). */
  emptyOnly?: boolean;
  /** Commits answered whose copy failed, by commit frame (see {@link lateAnswers}). */
  late?: Map<number, Answered>;
}

interface Found {
  report: CaptureReport;
  state?: State;
  /** A generation must begin: nothing captured yet, or a gap. */
  next?: 'first' | 'gap';
  /**
   * The gap is known to have lost commits: made by another connection (or folded into the file
   * by a close) that no capture copied (`SnapshotMeta.lost`). Other gaps (a damaged index, a WAL
   * header history cannot follow, a restore's leftovers) begin afresh from a file that holds no
   * commit history lacks, as far as anything shows.
   */
  lost?: boolean;
  checkpoint: boolean;
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

/** Copies the new committed frames; the caller holds the write lock. */
function copyNew(db: Database, dbPath: string, opts: CaptureOptions, stamp: Stamp, fast: boolean, foreign?: string, again = false): Found {
  const report: CaptureReport = { commits: 0, frames: 0, checkpointed: false };
  let st = loadState(dbPath, opts.source, true, true);
  if (st?.indexGood !== undefined) {
    // Looked at without the lock, the index ended in a torn line: look again under it, which
    // cuts the line (another child may have cut it and appended since, to the same size).
    dropState(dbPath);
    st = loadState(dbPath, opts.source, false, true);
  }
  if (!st) return { report, next: 'first', checkpoint: false };
  // History this generation holds cannot be appended to truthfully: begin another from the file.
  if (st.damaged) return { report, state: st, next: 'gap', checkpoint: false };
  if (st.uncut && st.seg) {
    fs.ftruncateSync(segmentFds(st.seg).data, frameOffset(st.seg.header.pageSize, st.seg.frames + 1));
    st.uncut = false;
  }
  if (stamp.recover && !stamp.answered) stamp.answered = readAnswered(opts.source);
  let late = lateAnswers.get(dbPath);
  if (stamp.recover) {
    // Commits answered by a process that went away before it could copy them (a restart while
    // the disk was full): their times are in the answered file, in place.
    for (const a of readAllAnswered(opts.source)) {
      if (late?.get(a.frame)) continue;
      (late ??= new Map()).set(a.frame, a);
    }
  }
  if (late) stamp.late = late;
  const wal = walOf(db, dbPath);
  if (wal === undefined) return unsure(db, dbPath, opts, report, foreign);
  const fd = wal.fd;
  try {
    // The WAL's header changes only when the WAL starts over, and then every frame after it has
    // the new salts: frames that follow on from the segment (its salts, its checksum chain) are
    // the same WAL going on, whatever the header says, so a commit's capture reads them alone
    // (one system call of a capture's nine). Nothing found: the header is looked at as below.
    // Only when this connection's last capture copied everything and no other connection
    // committed since (see `othersQuiet`): uncaptured frames of an old WAL (a program outside
    // agentdb committed them, or this connection's last capture failed), then a checkpoint, let
    // this connection's next commit start the WAL over behind them, and that commit would be
    // found only at the next capture, with its time. Not before a close (it deletes the WAL) or
    // a checkpoint (it starts the WAL over): those must know no newer WAL's frames wait behind.
    const seg0 = st.seg;
    if (fast && seg0 && wal.c1 === seg0.header.c1 && wal.c2 === seg0.header.c2 && wal.salt1 === seg0.header.salt1 && wal.salt2 === seg0.header.salt2) {
      const copied = copyCommitted(fd, frameOffset(seg0.header.pageSize, seg0.frames + 1), seg0.header, seg0, stamp);
      if (copied.lines.length > 0) {
        const found = recordCopied(st, seg0, copied, report, dbPath, opts);
        if (!found.checkpoint) return found;
      }
    }
    const head = Buffer.alloc(WAL_HEADER_BYTES);
    if (fs.readSync(fd, head, 0, WAL_HEADER_BYTES, 0) < WAL_HEADER_BYTES) return unsure(db, dbPath, opts, report, foreign);
    const hdr = parseWalHeader(head);
    if (!hdr) return unsure(db, dbPath, opts, report, foreign);
    wal.salt1 = hdr.salt1;
    wal.salt2 = hdr.salt2;
    wal.c1 = hdr.c1;
    wal.c2 = hdr.c2;
    let seg = st.seg;
    if (seg && seg.header.salt1 === hdr.salt1 && seg.header.salt2 === hdr.salt2 && (seg.header.c1 !== hdr.c1 || seg.header.c2 !== hdr.c2)) {
      // The same salts under another header: SQLite writes the header again with frame 1 when
      // the frames after the last one written were all rolled back (a big transaction spilled
      // from the cache, then failed), and a connection with another checkpoint count (each
      // keeps its own) writes it with its own. The chain starts from the header's checksum: kept
      // to the old one, no frame would ever follow on again, and capture would copy nothing,
      // silently. Frame 1 is written again only with no frame committed under these salts, so an
      // empty segment takes the new header; one holding frames cannot be, and starts over.
      if (seg.frames > 0) return { report, state: st, next: 'gap', checkpoint: false };
      adoptHeader(seg, head, hdr);
    }
    if (!seg || seg.header.salt1 !== hdr.salt1 || seg.header.salt2 !== hdr.salt2) {
      // Another child may have begun the next segment or generation meanwhile (see `loadState`):
      // look at the files in full before going on from what this one knew.
      if (!again && st.stamp !== stampOf(st.genDir, seg?.seq ?? 0, seg?.indexPath)) {
        dropState(dbPath);
        return copyNew(db, dbPath, opts, stamp, false, foreign, true);
      }
      // Committed frames of the old WAL past what was copied (a program outside agentdb committed
      // them, then checkpointed, and this connection's commit started the WAL over) are history
      // before the new WAL's: copied first. Not a restore's, which is no state of this generation.
      const leaving = restoreLeaving(st.genDir);
      // Another connection's commits that no capture copied, then the WAL started over (their
      // checkpoint, then a commit): they are in the file, and their frames may be overwritten by
      // the new WAL's or cut off (TRUNCATE). History cannot go on from what it has: a gap.
      // Unless every commit since this connection's last capture is in the new WAL: then none was
      // lost with the old one (another child's write started the WAL over, answered, and the
      // child was killed before its copy).
      if (foreign !== undefined && !stamp.emptyOnly && foreign === positionKey(st) && !allInNewWal(db, dbPath, fd, seg, hdr)) return { report, state: st, next: 'gap', lost: true, checkpoint: false };
      if (seg && !leaving && seg.header.pageSize === hdr.pageSize) {
        const before = copyCommitted(fd, frameOffset(seg.header.pageSize, seg.frames + 1), seg.header, seg, stamp);
        if (before.lines.length > 0) recordCopied(st, seg, before, report, dbPath, opts);
      }
      // A segment with nothing committed under its header (begun for a transaction that spilled
      // into the WAL, then rolled back) goes on from where the one before ended, as the file does:
      // the WAL written again from frame 1 takes it over, whatever its salts (a connection that
      // never started a WAL over writes fresh random ones). Beginning a generation was a full
      // snapshot of the database after every big transaction that failed.
      if (seg && seg.frames === 0 && !leaving && seg.header.pageSize === hdr.pageSize) {
        adoptHeader(seg, head, hdr);
        const copied = copyCommitted(fd, frameOffset(hdr.pageSize, 1), hdr, seg, stamp);
        return recordCopied(st, seg, copied, report, dbPath, opts);
      }
      // A WAL that started over. After a checkpoint SQLite adds one to salt-1. After the last
      // connection closed (checkpointing, deleting the WAL) the salts are new, and the file
      // must be what the generation's seal says. Anything else means commits capture never saw.
      // A restore in place leaving this generation folds its commit into the file uncaptured.
      const continued =
        !leaving &&
        ((seg !== undefined && hdr.salt1 === ((seg.header.salt1 + 1) >>> 0)) || sealHolds(st.genDir, dbPath, seg?.name ?? '', seg?.frames ?? 0));
      if (!continued || (seg && seg.header.pageSize !== hdr.pageSize)) return { report, state: st, next: 'gap', lost: answeredPast(seg, stamp.late, opts.source), checkpoint: false };
      // The segment closes: its index read in full once more. Damage found while this state was
      // cached (a commit's capture looks only at the index's size) would otherwise go unseen
      // until the state is rebuilt, and every commit captured until then be unrestorable.
      if (seg && indexUnsound(seg.indexPath)) return { report, state: st, next: 'gap', checkpoint: false };
      closeSegment(seg);
      seg = newSegment(st, head, hdr);
    }
    const copied = copyCommitted(fd, frameOffset(hdr.pageSize, seg.frames + 1), hdr, seg, stamp);
    return recordCopied(st, seg, copied, report, dbPath, opts);
  } catch (err) {
    closeWal(db);
    throw err;
  }
}

/**
 * Whether a commit was answered in the WAL `seg` copies, past what `seg` holds: that WAL is gone
 * (it started over behind capture's back), and those commits with it. The answered file and this
 * process's late answers say so; they are the evidence a gap needs to be marked lost.
 */
function answeredPast(seg: Segment | undefined, late: Map<number, Answered> | undefined, source: HistorySource): boolean {
  if (!seg) return false;
  const past = (a: Answered) => a.salt1 === seg.header.salt1 && a.salt2 === seg.header.salt2 && a.frame > seg.frames;
  return [...(late?.values() ?? [])].some(past) || readAllAnswered(source).some(past);
}

/** A segment's index with a damaged line, or a torn tail no crash of a capture holding the lock left. */
function indexUnsound(indexPath: string): boolean {
  const index = readIndex(indexPath);
  return index.damaged !== undefined || index.tail === 'torn';
}

/**
 * No WAL to go by (none, or emptied by another child's snapshot, which began a generation
 * without this child's segment changing): the salts cannot tell, so the files are looked at in full.
 */
function unsure(db: Database, dbPath: string, opts: CaptureOptions, report: CaptureReport, foreign: string | undefined): Found {
  const full = loadState(dbPath, opts.source, false, true);
  if (!full) return { report, next: 'first', checkpoint: false };
  if (full.damaged) return { report, state: full, next: 'gap', checkpoint: false };
  // Another connection committed since this one's last capture, nothing was copied since, and
  // the WAL holds nothing: a program outside agentdb committed and checkpointed (TRUNCATE) while
  // this handle was open. Its commits are in the file only: history cannot go on from what it has
  // (and closing now would seal the file as history's end). Not for a checkpoint alone (it moves
  // the data version too, but not the WAL index's count of commits).
  if (foreign !== undefined && foreign === positionKey(full) && committedSince(db, dbPath)) return { report, state: full, next: 'gap', lost: true, checkpoint: false };
  // A restore that crashed after putting its file in place left its generation marked: the
  // file is no state of it. Begun at once, not at the next write, or a moment in between
  // would restore the state before that restore.
  if (restoreLeaving(full.genDir)) return { report, state: full, next: 'gap', checkpoint: false };
  // Sealed where history ends, and written since with no WAL left to show it: another program
  // committed and its last close folded the commit into the file. History cannot go on from
  // what it has (a moment now would restore without that program's writes): a gap.
  if (sealBroken(full.genDir, dbPath, full.seg?.name ?? '', full.seg?.frames ?? 0)) return { report, state: full, next: 'gap', lost: true, checkpoint: false };
  return { report, state: full, checkpoint: false };
}

/** An empty segment takes the live WAL's header (`head`, parsed `hdr`): its frames chain from it. */
function adoptHeader(seg: Segment, head: Buffer, hdr: SegmentHeader): void {
  fs.writeSync(segmentFds(seg).data, head, 0, WAL_HEADER_BYTES, 0);
  seg.header = hdr;
  seg.c1 = hdr.c1;
  seg.c2 = hdr.c2;
}

/** Appends the index lines of what {@link copyCommitted} copied into `seg`, and moves the state on. */
function recordCopied(st: State, seg: Segment, copied: Copied, report: CaptureReport, dbPath: string, opts: CaptureOptions): Found {
  let idxGrew = 0;
  if (copied.lines.length > 0) {
    let lines = '';
    for (const c of copied.lines) lines += commitLine(c);
    const { index: idx, data } = segmentFds(seg);
    let wrote: number;
    try {
      wrote = fs.writeSync(idx, lines);
    } catch (err) {
      // The frames just copied are no part of the segment without their lines: cut them too.
      fs.ftruncateSync(data, frameOffset(seg.header.pageSize, seg.frames + 1));
      closeSegment(seg);
      throw err;
    }
    // A full disk can take part of the lines: cut them off and fail this capture (nothing is
    // checkpointed; the next one copies the frames again). The lines are ASCII: length is bytes.
    if (wrote !== lines.length) {
      fs.ftruncateSync(idx, fs.fstatSync(idx).size - wrote);
      fs.ftruncateSync(data, frameOffset(seg.header.pageSize, seg.frames + 1));
      closeSegment(seg);
      throw Object.assign(new Error(`history index of ${dbPath}: only ${wrote} of ${lines.length} bytes written (disk full?)`), { code: 'ENOSPC' });
    }
    idxGrew = lines.length;
    if (st.bytes !== undefined) st.bytes += idxGrew + copied.bytes;
    const last = copied.lines.at(-1)!;
    report.frames += last.frames - seg.frames;
    seg.frames = last.frames;
    seg.c1 = last.c1;
    seg.c2 = last.c2;
    st.dbPages = last.dbPages;
    report.commits += copied.lines.length;
  }
  // Only the index grew, by what was appended, unless a segment began: then look again.
  st.stamp = st.seg === seg ? bumpStamp(st.stamp, idxGrew) : stampOf(st.genDir, seg.seq, seg.indexPath);
  st.checkedAt = Date.now();
  st.seg = seg;
  return { report, state: st, checkpoint: frameOffset(seg.header.pageSize, seg.frames + 1) >= opts.checkpointBytes && !copied.uncommitted };
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

/**
 * Frames read by the first system call of a scan: one more than the segment's last commit took
 * (the next commit is most often alike, and one frame more tells where it ends), doubling up to
 * the most. Reading four frames for a commit of one was a tenth of a capture's time.
 */
const FIRST_CHUNK_FRAMES = 4;
const MAX_CHUNK_FRAMES = 256;

/**
 * Copies the valid frames of the live WAL from `start` up to its last commit frame into the
 * segment's data file at the same offsets, checked against the chain, read in chunks until a
 * frame does not belong (the end of this WAL's valid frames: after a checkpoint SQLite writes
 * over the old ones, which carry the old salts). Chunks are written as they are read, so one
 * huge commit never sits whole in memory; frames past the last commit (a transaction still
 * open) are cut off again at the end. A crash in between leaves frames past the index, which
 * the next load cuts (`loadState`).
 */
interface Copied {
  lines: CommitRecord[];
  bytes: number;
  uncommitted: boolean;
}

function copyCommitted(fd: number, start: number, hdr: SegmentHeader, seg: NonNullable<State['seg']>, stamp: Stamp): Copied {
  const fb = frameBytes(hdr.pageSize);
  let c1 = seg.c1;
  let c2 = seg.c2;
  const lines: CommitRecord[] = [];
  let frames = 0;
  let committedFrames = 0;
  let pos = start;
  let out: number | undefined;
  try {
    for (let want = seg.lastCommitFrames ? Math.min(seg.lastCommitFrames + 1, MAX_CHUNK_FRAMES) : FIRST_CHUNK_FRAMES; ; want = Math.min(want * 2, MAX_CHUNK_FRAMES)) {
      const buf = chunkBuffer(want * fb);
      const got = fs.readSync(fd, buf, 0, buf.length, pos);
      let valid = 0;
      for (let at = 0; at + fb <= got; at += fb) {
        const ok = checkFrame(hdr, buf, at, c1, c2);
        if (!ok) break;
        valid++;
        frames++;
        [c1, c2] = ok.c;
        if (ok.frame.commit > 0) {
          seg.lastCommitFrames = frames - committedFrames;
          committedFrames = frames;
          lines.push({ at: stamp.now, frames: seg.frames + frames, dbPages: ok.frame.commit, c1, c2 });
          const ans = stamp.answered;
          if (ans && ans.frame === seg.frames + frames && ans.c1 === c1 && ans.c2 === c2 && ans.salt1 === hdr.salt1 && ans.salt2 === hdr.salt2) {
            // The commit answered before a kill stopped its copy, and any found before it: they
            // took place by the time it was answered.
            for (const line of lines) line.at = Math.min(line.at, ans.at);
            stamp.answered = undefined;
          }
          const late = stamp.late?.get(seg.frames + frames);
          if (late && late.c1 === c1 && late.c2 === c2 && late.salt1 === hdr.salt1 && late.salt2 === hdr.salt2) {
            for (const line of lines) line.at = Math.min(line.at, late.at);
          }
        }
      }
      if (valid > 0) {
        out ??= segmentFds(seg).data;
        writeAll(out, buf, valid * fb, pos);
      }
      if (valid < want) break;
      pos += got;
    }
    // Keep only up to the last commit frame: frames of a transaction still open are not history.
    if (out !== undefined && committedFrames < frames) fs.ftruncateSync(out, start + committedFrames * fb);
  } catch (err) {
    // A write that failed part-way (a full disk) leaves the segment as it was: cut back to the
    // last frame it held, or a torn frame would sit inside the segment, failing its checksum at
    // every restore past it, once a later copy appended behind it (issue 25). Cutting frees
    // space; it needs none.
    if (out !== undefined) fs.ftruncateSync(out, start);
    // The segment's state is unknown after a failed write: the next capture opens it afresh.
    closeSegment(seg);
    throw err;
  }
  return { lines, bytes: committedFrames * fb, uncommitted: frames > committedFrames };
}

/**
 * Writes `bytes` of `buf` at `pos`, all of them or an error: `fs.writeSync` returns what one
 * write(2) took, which on a nearly full disk is less than asked, silently.
 */
function writeAll(fd: number, buf: Buffer, bytes: number, pos: number): void {
  let done = 0;
  while (done < bytes) {
    const n = fs.writeSync(fd, buf, done, bytes - done, pos + done);
    if (n <= 0) throw Object.assign(new Error(`history segment: wrote ${done} of ${bytes} bytes (disk full?)`), { code: 'ENOSPC' });
    done += n;
  }
}

/**
 * The buffer a scan reads frames into, kept between captures: a fresh 16 KB allocation on each
 * commit showed in a capture's profile. Nothing keeps a view of it past the scan.
 */
let chunk = Buffer.alloc(0);
const KEPT_CHUNK_BYTES = 1024 * 1024;
function chunkBuffer(bytes: number): Buffer {
  // A big commit's larger chunks are allocated for it alone, not kept for the process's life.
  if (bytes > KEPT_CHUNK_BYTES) return Buffer.allocUnsafe(bytes);
  if (chunk.length < bytes) chunk = Buffer.allocUnsafe(KEPT_CHUNK_BYTES);
  return chunk.subarray(0, bytes);
}

