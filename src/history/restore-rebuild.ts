import fs from 'node:fs';
import path from 'node:path';
import { AgentDbError } from '../errors.ts';
import { syncBehind, type SyncBehind } from './sync-behind.ts';
import { frameBatches } from './frame-scan.ts';
import { syncFile } from './file-sync.ts';
import { copyWithSha256 } from './snapshot.ts';
import { chunkSumsOnThread } from './hash-worker.ts';
import { CRC_CHUNK, SNAPSHOT_CRC, checkChunks, copyPrefixChecked, readSnapshotCrc, sameSums } from './snapshot-crc.ts';
import { FRAME_HEADER_BYTES } from './wal-format.ts';
import { verifyIntegrity } from './integrity.ts';
import type { RestorePlan } from './restore-plan.ts';

/**
 * Builds the database a plan describes at `outPath` (which must not be the live file): the
 * snapshot, checked against its sha256, then each frame's page written in order, each segment
 * checked frame by frame against its salts and cumulative checksums, the file cut to the last
 * commit's size, and the result checked with `PRAGMA quick_check` unless it is sound by
 * construction (`Rebuilt.sound`). Works on any folder of generations.
 * @throws AgentDbError HISTORY_CORRUPT naming the file that failed; `outPath` is removed then.
 */
export function buildRestore(plan: RestorePlan, outPath: string): void {
  const built = rebuild(plan, outPath);
  try {
    if (!built.sound) verifyIntegrity(outPath);
  } catch (err) {
    fs.rmSync(outPath, { force: true });
    throw err;
  }
}

/**
 * {@link buildRestore} without its `PRAGMA quick_check`: for a restore that adds its audit row
 * first and must check the file (unless `sound`) before anything takes its bytes for a database.
 * `flushAsWritten`: the file is about to be fsynced, so it is flushed on another thread as it is
 * written (`syncBehind`).
 * @throws AgentDbError HISTORY_CORRUPT naming the file that failed; `outPath` is removed then.
 */
export function rebuild(plan: RestorePlan, outPath: string, opts: { flushAsWritten?: boolean } = {}): Rebuilt {
  // The file is made first, so that the flushing thread and the copy below hold the same one.
  let flushing: SyncBehind | undefined;
  if (opts.flushAsWritten) {
    fs.writeFileSync(outPath, '');
    flushing = syncBehind(outPath);
  }
  try {
    // Hashing 100 MB costs three times copying it: a snapshot unchanged since its sha256 was
    // computed (same size and mtime) is copied by the kernel; any other is hashed as it is copied.
    const stat = fs.statSync(plan.snapshotPath, { throwIfNoEntry: false });
    if (!stat) throw new AgentDbError('HISTORY_CORRUPT', `snapshot ${plan.generation} is missing`);
    const v = plan.snapshot.verified;
    // Whether every byte copied was checked against the snapshot's checksums or sha256.
    let held = false;
    if (v && v.size === stat.size && v.mtimeMs === stat.mtimeMs) {
      // Size and time stay put when a byte rots in place: the snapshot is held to its chunk
      // checksums, computed on the other core while the kernel copies it.
      const sums = readSnapshotCrc(path.join(path.dirname(plan.snapshotPath), SNAPSHOT_CRC), stat.size);
      const keep = plan.dbPages * plan.snapshot.pageSize;
      if (sums && keep < stat.size) {
        // The database was smaller then: only what it kept is copied (and checked as it is),
        // where cutting a whole copy afterwards made ext4 flush it all (see below).
        copyPrefixChecked(plan.snapshotPath, outPath, keep, sums, `snapshot ${plan.generation}`);
        held = true;
      } else {
        const checking = sums && chunkSumsOnThread(plan.snapshotPath, CRC_CHUNK);
        fs.copyFileSync(plan.snapshotPath, outPath);
        if (sums) {
          let got: number[] | undefined;
          try {
            got = checking!.result();
          } catch {
            got = undefined;
          }
          if (got) sameSums(got, sums, `snapshot ${plan.generation}`);
          else checkChunks(outPath, sums, 'all', `snapshot ${plan.generation}`);
          held = true;
        }
      }
    } else {
      const { sha256 } = copyWithSha256(plan.snapshotPath, outPath);
      if (sha256 !== plan.snapshot.sha256)
        throw new AgentDbError('HISTORY_CORRUPT', `snapshot ${plan.generation} does not match its sha256 (${sha256} ≠ ${plan.snapshot.sha256})`);
      held = true;
    }
    const out = fs.openSync(outPath, 'r+');
    let dbPages = plan.snapshot.pages;
    const written = new Set<number>();
    try {
      for (const seg of plan.segments) dbPages = applySegment(out, plan.generation, seg, plan.snapshot.pageSize, written, plan.dbPages) ?? dbPages;
      // No fsync here: a restore checks and syncs the file before it is used. Cut only when the
      // size differs: ext4 flushes a file's delayed writes on any truncate (auto_da_alloc).
      const bytes = dbPages * plan.snapshot.pageSize;
      if (fs.fstatSync(out).size !== bytes) fs.ftruncateSync(out, bytes);
    } finally {
      fs.closeSync(out);
    }
    return { written, dbPages, sound: held && plan.snapshot.checked === true };
  } catch (err) {
    flushing?.stop();
    fs.rmSync(outPath, { force: true });
    throw err;
  } finally {
    flushing?.stop();
  }
}

/** What {@link rebuild} made: the pages it wrote over the snapshot's, and the file's size in pages. */
export interface Rebuilt {
  written: Set<number>;
  dbPages: number;
  /**
   * The snapshot passed `PRAGMA quick_check` when it was made (`SnapshotMeta.checked`) and
   * every byte copied from it was held to its checksums: the file is then the database exactly
   * as SQLite committed it, and needs no check of its own (see `integrity.ts`).
   */
  sound: boolean;
}

function applySegment(
  out: number,
  generation: string,
  seg: RestorePlan['segments'][number],
  pageSize: number,
  written: Set<number>,
  finalPages: number,
): number | undefined {
  let dbPages: number | undefined;
  // Consecutive pages are written with one call (a fill writes them as consecutive frames): one
  // write per page was 12,800 system calls for 50 MB.
  const run: Buffer[] = [];
  let runFirst = 0;
  const flush = () => {
    if (run.length === 0) return;
    const wrote = run.length === 1 ? fs.writeSync(out, run[0]!, 0, pageSize, (runFirst - 1) * pageSize) : fs.writevSync(out, run, (runFirst - 1) * pageSize);
    // writev writes nothing, without an error, from memory detached since (a scan growing the
    // WebAssembly memory the pages are in): loud, not a file with holes.
    // A short write is a full disk (write(2) takes what fits): answered STORAGE_FULL, retryable.
    if (wrote !== run.length * pageSize) throw new AgentDbError('STORAGE_FULL', `restore wrote ${wrote} of ${run.length * pageSize} bytes at page ${runFirst}`);
    run.length = 0;
  };
  for (const batch of frameBatches(generation, seg.name, seg.dataPath, seg.frames, pageSize)) {
    const { buf, frameBytes: fb } = batch;
    for (let i = 0; i < batch.count; i++) {
      const pgno = buf.readUInt32BE(i * fb);
      const commit = buf.readUInt32BE(i * fb + 4);
      // A page past the size the database ends at would only be cut off again.
      if (pgno <= finalPages) {
        if (run.length && (pgno !== runFirst + run.length || run.length === MAX_RUN)) flush();
        if (!run.length) runFirst = pgno;
        run.push(buf.subarray(i * fb + FRAME_HEADER_BYTES, i * fb + FRAME_HEADER_BYTES + pageSize));
        written.add(pgno);
      }
      if (commit > 0) dbPages = commit;
    }
    // The batch's memory is read into again for the next.
    flush();
  }
  return dbPages;
}

/** Pages written by one call of {@link applySegment} at most (the system's limit on buffers per write is 1024). */
const MAX_RUN = 512;

/**
 * The restored file checked (`PRAGMA quick_check`, removed when it fails) and synced before
 * anything takes it for a database; not checked when `sound` (see `Rebuilt.sound`).
 */
export function checkAndSync(file: string, sound: boolean): void {
  if (!sound) verifyIntegrity(file);
  syncFile(file);
}
