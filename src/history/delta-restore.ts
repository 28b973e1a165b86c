/**
 * A restore in place that goes back within the live generation writes only the pages that
 * changed since the moment it goes to, as one WAL commit: their images at that moment, taken
 * from the generation's frames (or its snapshot), and the database's size then. Going back five
 * minutes in a 1 GB database writes what those five minutes wrote, not 1 GB; and the restore is
 * a commit of the same generation (history goes on, no new snapshot).
 *
 * The commit is written as the database's -wal file while no connection has the database open
 * (the restore closed it everywhere, and the last close checkpointed and removed the old -wal):
 * the next connection to open it recovers the WAL as SQLite does after a crash, checksums
 * checked. The WAL is written whole beside the database, synced, then linked in as `<db>-wal`
 * at once: a connection opening the database meanwhile (a program outside agentdb) must never
 * find a -wal without its commit frame, or it recovers an empty WAL into its -shm, and the next
 * writer starts the WAL over across the restore's frames (the restore answered, the database
 * unchanged). A crash before the link leaves the database as it was; after it, restored.
 *
 * Every frame read is checked against its segment's salts and cumulative checksums, the
 * snapshot against its sha256 (or its verified size and time, as `rebuild` does), and the live
 * file against history on every page about to be written over: the pages written since the
 * moment must be in the file exactly as history last saw them. Anything else and the caller
 * restores the whole file instead.
 */
import fs from 'node:fs';
import path from 'node:path';
import { AgentDbError } from '../errors.ts';
import { listGenerations, listSegments, type GenerationInfo, type HistoryPosition, type HistorySource } from './history-files.ts';
import { readCommits } from './segment-index.ts';
import { ReadOnlyFiles } from './read-only-files.ts';
import type { RestorePlan } from './restore-plan.ts';
import { sha256File } from './snapshot.ts';
import { SNAPSHOT_CRC, checkChunks, readSnapshotCrc } from './snapshot-crc.ts';
import { WAL_HEADER_BYTES, FRAME_HEADER_BYTES, parseWalHeader } from './wal-format.ts';
import { frameBatches, pageOffset, PageIndex, type PageRef } from './frame-scan.ts';

/** The pages a delta restore writes, and what the live file must hold for it to be safe. */
export interface Delta {
  pageSize: number;
  /** The database's size in pages at the moment restored to, and now. */
  pagesAt: number;
  pagesNow: number;
  /** Each page to write (≤ pagesAt) and where its image at the moment is. */
  write: Map<number, PageRef>;
  /** Each page written since the moment (≤ pagesNow) and where its image now is. */
  now: Map<number, PageRef>;
  /** The position history ends at (the live state it was planned against). */
  end: HistoryPosition;
  /**
   * Where every page history has written since the plan's snapshot is as of `end` (frames
   * before the moment, then after it), and that snapshot: all a check of the whole live file
   * against history needs (`live-history.ts`).
   */
  history: { atT: PageIndex; now: PageIndex; snapshot: GenerationInfo };
}

/**
 * The pages that going back to `plan` writes, the live history ending at `end`: `chain` is the
 * plan's generation and every one after it, the last the live one, each after the first begun by
 * a snapshot that `follows` the one before exactly (so the pages written in them are all that
 * changed). Undefined when more than `maxPages` would be written (copying the rebuilt file in is
 * then cheaper) or the chain does not hold. Reads and checks every frame from the plan's
 * generation on.
 * @throws AgentDbError HISTORY_CORRUPT naming the file that failed.
 */
export function planDelta(plan: RestorePlan, chain: GenerationInfo[], end: HistoryPosition, maxPages: number): Delta | undefined {
  const gen = chain[0]!;
  const snapshot = gen.snapshot!;
  const taken = new Map(plan.segments.map((s) => [s.name, s.frames]));
  const atT = new PageIndex();
  const now = new PageIndex();
  let pagesAt = snapshot.pages;
  let pagesNow = snapshot.pages;
  let pastTarget = false;
  let reachedEnd = false;
  for (const [k, g] of chain.entries()) {
    const live = k === chain.length - 1;
    if (g.snapshot?.pageSize !== snapshot.pageSize) return undefined;
    if (k > 0) {
      // Each later generation must begin exactly where the one before ended.
      const f = g.snapshot.follows;
      const prev = chain[k - 1]!;
      if (!f || f.generation !== prev.name || g.snapshot.pages !== pagesNow || reachedEnd) return undefined;
      if (f.segment !== ended(prev).segment || f.frames !== ended(prev).frames) return undefined;
      pastTarget = true;
    }
    if (live && end.generation === g.name && end.segment === '') reachedEnd = true;
    for (const seg of listSegments(g)) {
      const commits = readCommits(seg.indexPath, seg.closed);
      const frames = commits.at(-1)?.frames ?? 0;
      // Commits past the position capture holds for the live file: history and file disagree.
      if (reachedEnd) {
        if (frames > 0) return undefined;
        continue;
      }
      if (live && seg.name === end.segment) {
        if (frames !== end.frames) return undefined;
        reachedEnd = true;
      }
      if (frames === 0) continue;
      const before = pastTarget ? 0 : (taken.get(seg.name) ?? 0);
      if (!pastTarget && before < frames) pastTarget = true;
      const beforeFile = atT.file(seg.dataPath);
      const nowFile = now.file(seg.dataPath);
      for (const batch of frameBatches(g.name, seg.name, seg.dataPath, frames, snapshot.pageSize)) {
        const { buf, first, frameBytes: fb } = batch;
        for (let i = 0; i < batch.count; i++) {
          const pgno = buf.readUInt32BE(i * fb);
          const commit = buf.readUInt32BE(i * fb + 4);
          if (first + i <= before) {
            atT.set(pgno, beforeFile, pageOffset(batch, i, snapshot.pageSize));
            if (commit) pagesAt = commit;
          } else {
            now.set(pgno, nowFile, pageOffset(batch, i, snapshot.pageSize));
            if (now.size > maxPages) return undefined;
          }
          if (commit) pagesNow = commit;
        }
      }
    }
  }
  if (!reachedEnd) return undefined;
  const write = new Map<number, PageRef>();
  const since = now.entries(Math.max(pagesAt, pagesNow));
  const pages = [...since.keys()];
  for (let p = pagesNow + 1; p <= pagesAt; p++) pages.push(p);
  const fromSnapshot: number[] = [];
  for (const p of pages) {
    if (p > pagesAt || write.has(p)) continue;
    let ref = atT.get(p);
    if (!ref) {
      if (p > snapshot.pages) throw new AgentDbError('HISTORY_CORRUPT', `page ${p} of ${gen.name} is in neither its snapshot nor its frames`);
      ref = { file: gen.snapshotPath, offset: (p - 1) * snapshot.pageSize };
      fromSnapshot.push(ref.offset);
    }
    write.set(p, ref);
  }
  if (write.size > maxPages) return undefined;
  if (fromSnapshot.length) checkSnapshot(gen, fromSnapshot);
  for (const p of since.keys()) if (p > pagesNow) since.delete(p);
  return { pageSize: snapshot.pageSize, pagesAt, pagesNow, write, now: since, end, history: { atT, now, snapshot: gen } };
}

/** Pages compared per read of {@link liveMatches}. */
const MATCH_RUN_PAGES = 256;

/**
 * Whether the live file holds, untouched, the state `delta` was planned against: its size, and
 * every page the restore writes over (changed since the moment, within the size it goes back
 * to). Compared a run at a time: consecutive pages of the file against their images at
 * a steady stride in one history file (a fill writes consecutive pages as consecutive frames),
 * each side read at once; one pread per page of each side was a third of going back over a
 * file that doubled since (12,800 pages).
 */
export function liveMatches(dbPath: string, delta: Delta): boolean {
  const ps = delta.pageSize;
  const st = fs.statSync(dbPath, { throwIfNoEntry: false });
  if (!st || st.size !== delta.pagesNow * ps) return false;
  // Pages past the size at the moment are cut off with the commit, whatever they hold: comparing
  // them (a file that doubled since: 12,800 pages) took longer than the rest of the restore but
  // reading its frames.
  const entries = [...delta.now].filter(([p]) => p <= delta.pagesAt).sort((x, y) => x[0] - y[0]);
  const files = new ReadOnlyFiles();
  const maxStride = ps + FRAME_HEADER_BYTES;
  const live = Buffer.allocUnsafe(MATCH_RUN_PAGES * ps);
  const images = Buffer.allocUnsafe(MATCH_RUN_PAGES * maxStride);
  try {
    const liveFd = files.fd(dbPath);
    for (let i = 0; i < entries.length; ) {
      const [p0, r0] = entries[i]!;
      let stride = maxStride;
      let j = i + 1;
      for (; j < entries.length && j - i < MATCH_RUN_PAGES; j++) {
        const [p, r] = entries[j]!;
        if (p !== p0 + (j - i) || r.file !== r0.file) break;
        if (j === i + 1) {
          stride = r.offset - r0.offset;
          if (stride < ps || stride > maxStride) break;
        } else if (r.offset !== r0.offset + (j - i) * stride) break;
      }
      const k = j - i;
      readFully(liveFd, live, k * ps, (p0 - 1) * ps, dbPath);
      readFully(files.fd(r0.file), images, (k - 1) * stride + ps, r0.offset, r0.file);
      for (let n = 0; n < k; n++) {
        if (live.compare(images, n * stride, n * stride + ps, n * ps, (n + 1) * ps) !== 0) return false;
      }
      i = j;
    }
  } finally {
    files.close();
  }
  return true;
}

function readFully(fd: number, into: Buffer, bytes: number, at: number, file: string): void {
  if (fs.readSync(fd, into, 0, bytes, at) !== bytes) throw new AgentDbError('HISTORY_CORRUPT', `${path.basename(file)} is shorter than its history says`);
}

/**
 * The snapshot's chunks holding `offsets` checked against the checksums written with it; a
 * snapshot without them (made before they were) has its sha256 checked unless it is unchanged
 * since that was computed (as `rebuild` decides).
 */
export function checkSnapshot(gen: GenerationInfo, offsets: number[]): void {
  const stat = fs.statSync(gen.snapshotPath, { throwIfNoEntry: false });
  if (!stat) throw new AgentDbError('HISTORY_CORRUPT', `snapshot ${gen.name} is missing`);
  const sums = readSnapshotCrc(path.join(gen.dir, SNAPSHOT_CRC), stat.size);
  if (sums) return checkChunks(gen.snapshotPath, sums, offsets, `snapshot ${gen.name}`);
  const v = gen.snapshot!.verified;
  if (v && v.size === stat.size && v.mtimeMs === stat.mtimeMs) return;
  const sha256 = sha256File(gen.snapshotPath);
  if (sha256 !== gen.snapshot!.sha256)
    throw new AgentDbError('HISTORY_CORRUPT', `snapshot ${gen.name} does not match its sha256 (${sha256} ≠ ${gen.snapshot!.sha256})`);
}

/**
 * Where a delta restore's commit, written in a WAL with these 8 bytes of salts, is in the
 * history: the end of the first commit of the segment copied from that WAL. Undefined when it
 * never landed (no such segment, or one that holds no commit: SQLite ignored that WAL).
 */
export function landedAt(source: HistorySource, salts: Buffer): HistoryPosition | undefined {
  const want = [salts.readUInt32BE(0), salts.readUInt32BE(4)];
  for (const gen of listGenerations(source)) {
    for (const seg of listSegments(gen)) {
      const head = Buffer.alloc(WAL_HEADER_BYTES);
      let fd: number;
      try {
        fd = fs.openSync(seg.dataPath, 'r');
      } catch {
        continue;
      }
      try {
        fs.readSync(fd, head, 0, WAL_HEADER_BYTES, 0);
      } finally {
        fs.closeSync(fd);
      }
      const hdr = parseWalHeader(head);
      if (hdr === undefined || hdr.salt1 !== want[0] || hdr.salt2 !== want[1]) continue;
      const first = readCommits(seg.indexPath, seg.closed)[0];
      return first ? { generation: gen.name, segment: seg.name, frames: first.frames } : undefined;
    }
  }
  return undefined;
}

/** Where a generation's history ends, as capture states a position: its last segment and the frames in it. */
function ended(gen: GenerationInfo): { segment: string; frames: number } {
  const seg = listSegments(gen).at(-1);
  return seg ? { segment: seg.name, frames: readCommits(seg.indexPath, seg.closed).at(-1)?.frames ?? 0 } : { segment: '', frames: 0 };
}
