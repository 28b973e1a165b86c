import fs from 'node:fs';
import type { Database } from 'better-sqlite3';
import { commitsSinceCapture } from './capture-connection.ts';
import type { Segment } from './capture-segment.ts';
import type { SegmentHeader } from './history-files.ts';
import { FRAME_HEADER_BYTES, checkFrame, frameBytes, frameOffset } from './wal-format.ts';
import { readWalIndex } from './wal-index.ts';

/** Frames read at a time by {@link allInNewWal}'s count. */
const CHUNK_FRAMES = 256;

/**
 * Whether the WAL, started over once since segment `seg` (salt-1 one more: a checkpoint of a
 * WAL captured to its end, as capture's own), holds every commit made since this connection's
 * last capture: the WAL index counts each commit, whoever made it, and a checkpoint or a WAL
 * started over does not move the count. A commit of the old WAL after that capture counts but
 * is not here: then history cannot go on (`copyNew`). Any doubt is a gap.
 */
export function allInNewWal(db: Database, dbPath: string, fd: number, seg: Segment | undefined, hdr: SegmentHeader): boolean {
  if (!seg || seg.header.pageSize !== hdr.pageSize || hdr.salt1 !== (seg.header.salt1 + 1) >>> 0) return false;
  const since = commitsSinceCapture(db, dbPath);
  const index = readWalIndex(db, dbPath);
  if (since === undefined || !index || index.salt1 !== hdr.salt1 || index.salt2 !== hdr.salt2) return false;
  return walCommits(fd, hdr, index.lastFrame) === since;
}

/** The commit frames among the WAL's first `lastFrame` frames, checked against its chain; undefined when a frame does not belong. */
function walCommits(fd: number, hdr: SegmentHeader, lastFrame: number): number | undefined {
  const fb = frameBytes(hdr.pageSize);
  let c1 = hdr.c1;
  let c2 = hdr.c2;
  let commits = 0;
  let last: { pgno: number; commit: number; page: Buffer } | undefined;
  for (let first = 1; first <= lastFrame; first += CHUNK_FRAMES) {
    const count = Math.min(CHUNK_FRAMES, lastFrame - first + 1);
    // Read only when a WAL started over under another connection's commits: no buffer kept.
    const buf = Buffer.allocUnsafe(count * fb);
    if (fs.readSync(fd, buf, 0, buf.length, frameOffset(hdr.pageSize, first)) < buf.length) return undefined;
    for (let at = 0; at < buf.length; at += fb) {
      const ok = checkFrame(hdr, buf, at, c1, c2);
      if (!ok) return undefined;
      [c1, c2] = ok.c;
      if (ok.frame.commit === 0) {
        last = undefined;
        continue;
      }
      // A connection with powersafe_overwrite off pads its commit to a sector boundary by
      // writing the commit frame again: one commit, not two. (Two commits of the very same page
      // bytes count as one too: fewer than the WAL index's count reads as a gap, never as none.)
      const page = buf.subarray(at + FRAME_HEADER_BYTES, at + fb);
      if (!(last && last.pgno === ok.frame.pgno && last.commit === ok.frame.commit && last.page.equals(page))) commits++;
      last = { pgno: ok.frame.pgno, commit: ok.frame.commit, page: Buffer.from(page) };
    }
  }
  return commits;
}
