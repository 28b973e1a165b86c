import fs from 'node:fs';
import type { Database } from 'better-sqlite3';
import { readAllAnswered, readAnswered, type Answered } from './answered-commits.ts';
import { answeredAhead } from './answered-ahead.ts';
import type { CaptureOptions, CaptureReport } from './capture.ts';
import { closeWal, committedSince, walOf } from './capture-connection.ts';
import { closeSegment, newSegment, segmentFds, type Segment } from './capture-segment.ts';
import { dropState, loadState, positionKey, type State } from './capture-state.ts';
import { bumpStamp, stampOf } from './capture-stamp.ts';
import { copyCommitted, type Copied, type Stamp } from './copy-committed.ts';
import type { HistorySource, SegmentHeader } from './history-files.ts';
import { lateAnswers, lateKey } from './late-answers.ts';
import { commitLine, readIndex } from './segment-index.ts';
import { allInNewWal } from './new-wal-commits.ts';
import { restoreLeaving, sealAt, sealHolds } from './seal.ts';
import { WAL_HEADER_BYTES, frameOffset, parseWalHeader } from './wal-format.ts';
import { readWalIndex } from './wal-index.ts';
import { writeAll } from './write-all.ts';

// What capture copies under the write lock: the live WAL's committed frames beyond what history
// holds, or, where the WAL started over behind capture's back, the gap that begins a generation.
// `capture.ts` takes the lock and the time and acts on what this finds.

export interface Found {
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

/** Copies the new committed frames; the caller holds the write lock. */
export function copyNew(db: Database, dbPath: string, opts: CaptureOptions, stamp: Stamp, fast: boolean, foreign?: string, again = false): Found {
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
    // Keyed by WAL and frame (`lateKey`): records of older WALs, already copied, name other
    // keys. Two records of one commit (this process's and the file's) carry the same time.
    for (const a of readAllAnswered(opts.source)) {
      const key = lateKey(a.salt1, a.salt2, a.frame);
      if (!late?.has(key)) (late ??= new Map()).set(key, a);
    }
  }
  if (late) stamp.late = late;
  stamp.committed ??= committedEnd(db, dbPath);
  const wal = walOf(db, dbPath);
  if (wal === undefined) return unsure(db, dbPath, opts, report, foreign, stamp.late);
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
      // The same WAL: its frames are numbered as the segment's, so the index's last frame says how many follow.
      const ahead = stamp.lastFrame !== undefined && stamp.lastFrame > seg0.frames ? stamp.lastFrame - seg0.frames + 1 : undefined;
      const copied = copyCommitted(fd, frameOffset(seg0.header.pageSize, seg0.frames + 1), seg0.header, seg0, stamp, ahead);
      if (copied.lines.length > 0) {
        const found = recordCopied(st, seg0, copied, report, dbPath, opts);
        if (!found.checkpoint) return followsWal(found, stamp);
      }
    }
    const head = Buffer.alloc(WAL_HEADER_BYTES);
    if (fs.readSync(fd, head, 0, WAL_HEADER_BYTES, 0) < WAL_HEADER_BYTES) return unsure(db, dbPath, opts, report, foreign, stamp.late);
    const hdr = parseWalHeader(head);
    if (!hdr) return unsure(db, dbPath, opts, report, foreign, stamp.late);
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
      // Should commits answered under these salts lie past what the segment holds, they are gone
      // with the old frames: the gap is marked lost, so no restore answers without them.
      if (seg.frames > 0) return { report, state: st, next: 'gap', lost: answeredPast(seg, stamp.late, opts.source), checkpoint: false };
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
      if (foreign !== undefined && !stamp.emptyOnly && foreign === positionKey(st) && !allInNewWal(db, dbPath, fd, seg, hdr))
        return { report, state: st, next: 'gap', lost: true, checkpoint: false };
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
        return followsWal(recordCopied(st, seg, copied, report, dbPath, opts), stamp);
      }
      // A WAL that started over. After a checkpoint SQLite adds one to salt-1. After the last
      // connection closed (checkpointing, deleting the WAL) the salts are new, and the file
      // must be what the generation's seal says. Anything else means commits capture never saw.
      // A restore in place leaving this generation folds its commit into the file uncaptured.
      const continued =
        !leaving && ((seg !== undefined && hdr.salt1 === (seg.header.salt1 + 1) >>> 0) || sealHolds(st.genDir, dbPath, seg?.name ?? '', seg?.frames ?? 0));
      if (!continued || (seg && seg.header.pageSize !== hdr.pageSize))
        return { report, state: st, next: 'gap', lost: answeredPast(seg, stamp.late, opts.source), checkpoint: false };
      // The segment closes: its index read in full once more. Damage found while this state was
      // cached (a commit's capture looks only at the index's size) would otherwise go unseen
      // until the state is rebuilt, and every commit captured until then be unrestorable.
      if (seg && indexUnsound(seg.indexPath)) return { report, state: st, next: 'gap', checkpoint: false };
      closeSegment(seg);
      seg = newSegment(st, head, hdr);
    }
    const copied = copyCommitted(fd, frameOffset(hdr.pageSize, seg.frames + 1), hdr, seg, stamp);
    return followsWal(recordCopied(st, seg, copied, report, dbPath, opts), stamp);
  } catch (err) {
    closeWal(db);
    throw err;
  }
}

/** Where the WAL index says the WAL's committed frames end (`Stamp.committed`), when it can be read. */
function committedEnd(db: Database, dbPath: string): Stamp['committed'] {
  const idx = readWalIndex(db, dbPath);
  return idx && { salt1: idx.salt1, salt2: idx.salt2, lastFrame: idx.lastFrame, c1: idx.c1, c2: idx.c2 };
}

/**
 * What a copy found, unless history's end is not where the WAL index says the WAL it copies
 * commits to (the same salts, another frame or checksum): then history cannot follow that WAL.
 * A commit SQLite rolled back that a build before this check copied (see `Stamp.committed`), or
 * anything else that put history off the WAL's chain, left every copy after it finding nothing,
 * and a checkpoint folded the commits it missed into the file: restores went on answering the
 * state without them. A gap instead, marked lost: restores between history's end and its
 * snapshot refuse (HISTORY_LOST), and history goes on from the file.
 */
function followsWal(found: Found, stamp: Stamp): Found {
  const seg = found.state?.seg;
  const c = stamp.committed;
  if (found.next || !seg || !c || c.salt1 !== seg.header.salt1 || c.salt2 !== seg.header.salt2) return found;
  if (c.lastFrame === seg.frames && (c.lastFrame === 0 || (c.c1 === seg.c1 && c.c2 === seg.c2))) return found;
  return { report: found.report, state: found.state, next: 'gap', lost: true, checkpoint: false };
}

/**
 * Whether a commit was answered in the WAL `seg` copies, past what `seg` holds: that WAL is gone
 * (it started over behind capture's back), and those commits with it. The answered file and this
 * process's late answers say so; they are the evidence a gap needs to be marked lost.
 */
function answeredPast(seg: Segment | undefined, late: Map<string, Answered> | undefined, source: HistorySource): boolean {
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
function unsure(
  db: Database,
  dbPath: string,
  opts: CaptureOptions,
  report: CaptureReport,
  foreign: string | undefined,
  late: Map<string, Answered> | undefined,
): Found {
  const full = loadState(dbPath, opts.source, false, true);
  if (!full) return { report, next: 'first', checkpoint: false };
  if (full.damaged) return { report, state: full, next: 'gap', checkpoint: false };
  // Another connection committed since this one's last capture, nothing was copied since, and
  // the WAL holds nothing: a program outside agentdb committed and checkpointed (TRUNCATE) while
  // this handle was open. Its commits are in the file only: history cannot go on from what it has
  // (and closing now would seal the file as history's end). Not for a checkpoint alone (it moves
  // the data version too, but not the WAL index's count of commits).
  if (foreign !== undefined && foreign === positionKey(full) && committedSince(db, dbPath))
    return { report, state: full, next: 'gap', lost: true, checkpoint: false };
  // A restore that crashed after putting its file in place left its generation marked: the
  // file is no state of it. Begun at once, not at the next write, or a moment in between
  // would restore the state before that restore.
  if (restoreLeaving(full.genDir)) return { report, state: full, next: 'gap', checkpoint: false };
  // Sealed where history ends, and written since with no WAL left to show it: another program
  // committed and its last close folded the commit into the file. History cannot go on from
  // what it has (a moment now would restore without that program's writes): a gap.
  const seal = sealAt(full.genDir, dbPath, full.seg?.name ?? '', full.seg?.frames ?? 0);
  if (seal === 'broken') return { report, state: full, next: 'gap', lost: true, checkpoint: false };
  // Unsealed here, and a commit answered after history's last moment that no WAL holds: a close
  // folded it into the file uncopied (a child left by its killed worker, on a full disk). Sealed
  // over, restores after its answer would leave it out silently (review R3): the gap is lost.
  // Not looked for under a seal that holds: the file is history's end, untouched since.
  if (seal === 'none' && answeredAhead(full, opts.source, late)) return { report, state: full, next: 'gap', lost: true, checkpoint: false };
  return { report, state: full, checkpoint: false };
}

/** An empty segment takes the live WAL's header (`head`, parsed `hdr`): its frames chain from it. */
function adoptHeader(seg: Segment, head: Buffer, hdr: SegmentHeader): void {
  writeAll(segmentFds(seg).data, head, WAL_HEADER_BYTES, 0);
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
