/**
 * Whether the live file is, byte for byte, what history says it is at the end of a delta's
 * plan: every 64 KiB chunk no frame has written since the plan's snapshot matches that
 * snapshot's checksum for it, and every page of a chunk some frame wrote matches its image (the
 * frame's, or the snapshot's page, itself held to its chunk checksum). A restore in place that
 * finds it so, from a snapshot that passed the structure check when it was made, leaves the
 * snapshot plus committed frames — a database SQLite committed — and needs no structure check
 * of the result. The generation's seal cannot say as much: it is written by the close inside
 * the restore, so damage made while the database was open passes it (hostile review). The
 * file's checksums are computed on the other core while this one compares the written pages:
 * about a third of the structure check's 98 ms for 100 MB here.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Database } from 'better-sqlite3';
import type { Delta } from './delta-restore.ts';
import { checkSnapshot } from './delta-restore.ts';
import type { PageRef } from './frame-scan.ts';
import { chunkSumsOnThread } from './hash-worker.ts';
import { keptDescriptor } from './kept-descriptors.ts';
import { ReadOnlyFiles } from './read-only-files.ts';
import { CRC_CHUNK, SNAPSHOT_CRC, readSnapshotCrc } from './snapshot-crc.ts';

/**
 * Past this share of the file's pages written since the snapshot, comparing them one by one
 * costs more than the structure check: the caller runs that instead.
 */
const MAX_WRITTEN_SHARE = 1 / 16;

/**
 * True when `dbPath` (closed everywhere but by `live`, this process's connection) is exactly
 * history's state at `delta.end`; false when any byte differs, too much was written since the snapshot to compare, or the plan's snapshot
 * has no chunk checksums.
 * @throws AgentDbError HISTORY_CORRUPT when the snapshot's pages read fail their checksums.
 */
export function liveIsHistory(live: Database, dbPath: string, delta: Delta): boolean {
  const { pageSize: ps, pagesNow } = delta;
  const { atT, now, snapshot: gen } = delta.history;
  const snap = gen.snapshot!;
  const sums = readSnapshotCrc(path.join(gen.dir, SNAPSHOT_CRC), snap.bytes);
  if (!sums || CRC_CHUNK % ps !== 0) return false;
  if ((fs.statSync(dbPath, { throwIfNoEntry: false })?.size ?? -1) !== pagesNow * ps) return false;
  const written = new Map<number, PageRef>(atT.entries(pagesNow));
  for (const [p, ref] of now.entries(pagesNow)) written.set(p, ref);
  if (written.size > pagesNow * MAX_WRITTEN_SHARE) return false;
  const perChunk = CRC_CHUNK / ps;
  const chunks = Math.ceil(pagesNow / perChunk);
  // Chunks compared page by page: any page written, or not wholly inside the snapshot.
  const byPage = new Set<number>();
  for (const p of written.keys()) byPage.add(Math.floor((p - 1) / perChunk));
  for (let c = 0; c < chunks; c++) if ((c + 1) * perChunk > Math.min(pagesNow, snap.pages)) byPage.add(c);
  // Read through the process's kept descriptor, on both threads: `live` has the file open, and
  // closing a descriptor of it would let go SQLite's lock (see `kept-descriptors.ts`).
  const fd = keptDescriptor(live, dbPath, true);
  if (fd === undefined) return false;
  const summing = chunkSumsOnThread(dbPath, CRC_CHUNK, fd);
  if (!samePages(fd, [...byPage], perChunk, pagesNow, written, delta)) return false;
  let liveSums: number[];
  try {
    liveSums = summing.result();
  } catch {
    return false;
  }
  if (liveSums.length !== chunks) return false;
  for (let c = 0; c < chunks; c++) if (!byPage.has(c) && liveSums[c] !== sums.readUInt32BE(c * 4)) return false;
  return true;
}

/** Every page of `chunks` in the live file equals its image: the last frame's, or the snapshot's. */
function samePages(liveFd: number, chunks: number[], perChunk: number, pagesNow: number, written: Map<number, PageRef>, delta: Delta): boolean {
  const ps = delta.pageSize;
  const gen = delta.history.snapshot;
  const files = new ReadOnlyFiles();
  const page = Buffer.allocUnsafe(ps);
  const image = Buffer.allocUnsafe(ps);
  try {
    for (const c of chunks.sort((a, b) => a - b)) {
      const first = c * perChunk + 1;
      const last = Math.min(first + perChunk - 1, pagesNow);
      let snapshotChecked = false;
      for (let p = first; p <= last; p++) {
        let ref = written.get(p);
        if (!ref) {
          if (p > gen.snapshot!.pages) return false;
          if (!snapshotChecked) checkSnapshot(gen, [(p - 1) * ps]);
          snapshotChecked = true;
          ref = { file: gen.snapshotPath, offset: (p - 1) * ps };
        }
        if (fs.readSync(liveFd, page, 0, ps, (p - 1) * ps) !== ps) return false;
        if (fs.readSync(files.fd(ref.file), image, 0, ps, ref.offset) !== ps) return false;
        if (!page.equals(image)) return false;
      }
    }
    return true;
  } finally {
    files.close();
  }
}
