import fs from 'node:fs';
import type { Answered } from './answered-commits.ts';
import { closeSegment, segmentFds } from './capture-segment.ts';
import type { State } from './capture-state.ts';
import type { CommitRecord, SegmentHeader } from './history-files.ts';
import { lateKey } from './late-answers.ts';
import { checkFrame, frameBytes } from './wal-format.ts';
import { writeAll } from './write-all.ts';

// Capture's copy of committed frames from the live WAL into the current segment's data file,
// each commit stamped with its time: the loop every commit's capture runs (see `copyNew`).

/**
 * What one capture goes by besides the files: the time it gives the commits it copies, the record
 * of a commit answered before a kill stopped its copy, and whether it runs before a close.
 */
export interface Stamp {
  now: number;
  /** Look for a commit answered before a kill stopped its copy (`readAnswered`). */
  recover: boolean;
  answered?: Answered;
  /** Before a close: another connection's commits mean a gap only with the WAL empty (see `copyBeforeClose`). */
  emptyOnly?: boolean;
  /** Commits answered whose copy failed, by WAL and commit frame (`lateKey`, late-answers.ts). */
  late?: Map<string, Answered>;
  /**
   * The WAL's last committed frame as its index said under the write lock (`noteAnswered`): a
   * commit's copy reads up to it and one frame more at once, where a guess from the last commit's
   * size took a second read whenever commits differed in size (issue 31).
   */
  lastFrame?: number;
  /**
   * Where SQLite's WAL index (read under the write lock) says the WAL's committed frames end, and
   * under which salts: a frame past it is no commit, whatever its header says. A transaction whose
   * frames were all written, its commit frame included, and which then failed to enter them in
   * the WAL index (on a full disk the -shm cannot grow: SQLITE_IOERR_SHMSIZE) leaves a commit
   * frame that chains and checks like any, yet SQLite rolled it back and writes the next
   * transaction over it. Copied, history held a commit that never was, and every commit after it
   * failed the chain: copies found nothing, silently, and a checkpoint folded them into the file
   * uncopied (session 30, G7: restores answered ok without acknowledged rows, then malformed).
   */
  committed?: { salt1: number; salt2: number; lastFrame: number; c1: number; c2: number };
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
export interface Copied {
  lines: CommitRecord[];
  bytes: number;
  uncommitted: boolean;
}

export function copyCommitted(fd: number, start: number, hdr: SegmentHeader, seg: NonNullable<State['seg']>, stamp: Stamp, firstFrames?: number): Copied {
  const fb = frameBytes(hdr.pageSize);
  let c1 = seg.c1;
  let c2 = seg.c2;
  const lines: CommitRecord[] = [];
  let frames = 0;
  let committedFrames = 0;
  let pos = start;
  let out: number | undefined;
  const c = stamp.committed;
  // Frames numbered as the WAL numbers them (the segment copies it from frame 1).
  const limit = c && c.salt1 === hdr.salt1 && c.salt2 === hdr.salt2 ? c.lastFrame : undefined;
  try {
    for (
      let want = Math.min(firstFrames ?? (seg.lastCommitFrames ? seg.lastCommitFrames + 1 : FIRST_CHUNK_FRAMES), MAX_CHUNK_FRAMES);
      ;
      want = Math.min(want * 2, MAX_CHUNK_FRAMES)
    ) {
      const buf = chunkBuffer(want * fb);
      const got = fs.readSync(fd, buf, 0, buf.length, pos);
      let valid = 0;
      for (let at = 0; at + fb <= got; at += fb) {
        const ok = checkFrame(hdr, buf, at, c1, c2);
        if (!ok) break;
        valid++;
        frames++;
        [c1, c2] = ok.c;
        // Past what the WAL index counts committed: frames of a transaction SQLite rolled back (see `Stamp.committed`).
        if (ok.frame.commit > 0 && (limit === undefined || seg.frames + frames <= limit)) {
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
          const late = stamp.late?.get(lateKey(hdr.salt1, hdr.salt2, seg.frames + frames));
          if (late && late.c1 === c1 && late.c2 === c2) {
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
