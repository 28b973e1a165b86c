/**
 * The generation a restore that copies a file in begins (a fork, or going back in place over
 * much of the file), made without writing or hashing the restored file again: its snapshot is
 * the snapshot the restore started from, hard-linked (snapshots never change), with the same
 * sha256 and chunk checksums, and its first segment one commit of every page the restore wrote
 * on top of it (the frames it applied, and its audit row), read from the restored file. That
 * commit is the generation's base (`SnapshotMeta.base`): it carries the generation's start time,
 * so every moment of the generation includes it.
 *
 * Copying the restored file as the new snapshot cost a second 100 MB copy, a sha256 and a read
 * for the chunk checksums: restores that copy a file in ran at 0.2–0.36× a plain copy of it.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  SEGMENTS_DIR,
  SEGMENT_DATA_EXT,
  SEGMENT_INDEX_EXT,
  SNAPSHOT_FILE,
  generationName,
  listGenerations,
  segmentName,
  type CommitRecord,
  type HistorySource,
} from './history-files.ts';
import { commitLine } from './segment-index.ts';
import type { RestorePlan } from './restore-plan.ts';
import { writeSeal } from './seal.ts';
import { syncDir } from './file-sync.ts';
import { publish, removeDeadTemps } from './snapshot.ts';
import { SNAPSHOT_CRC, readSnapshotCrc, writeSnapshotCrc } from './snapshot-crc.ts';
import { writeWal, type WalWritten } from './wal-writer.ts';
import { writeAll } from './write-all.ts';

/**
 * A generation made ready beside the others (`g….<pid>.linked.tmp`: a name no snapshot's
 * temporary folder has, see `removeDeadTemps`), to publish once the restored file is in place.
 */
export interface PreparedGeneration {
  source: HistorySource;
  tmp: string;
  plan: RestorePlan;
  /** The base commit, when the restore wrote any page over the snapshot. */
  base?: WalWritten & { dbPages: number };
  /** Its number: after every generation here, and after `above`. */
  seq: number;
}

/**
 * Prepares the generation that begins with `file`, the restored database (complete and synced,
 * not yet in place): `plan`'s snapshot linked (copied where the file system refuses links), and
 * the `written` pages of `file` as the base commit, each as `file` holds it now. Numbered after
 * every generation here and after `above` (a disaster restore: the blob store's generations of
 * the database, which its next backups must not take for these).
 */
export function prepareGeneration(source: HistorySource, plan: RestorePlan, file: string, written: Iterable<number>, above = 0): PreparedGeneration {
  fs.mkdirSync(source.generationsDir, { recursive: true });
  removeDeadTemps(source.generationsDir);
  // One restore of a database runs at a time: any prepared generation of this process is a
  // failed one's (removeDeadTemps leaves a living process's, this one's included).
  const mine = `.${process.pid}.linked.tmp`;
  for (const name of fs.readdirSync(source.generationsDir))
    if (name.endsWith(mine)) fs.rmSync(path.join(source.generationsDir, name), { recursive: true, force: true });
  const seq = Math.max(listGenerations(source).at(-1)?.seq ?? 0, above) + 1;
  const tmp = path.join(source.generationsDir, `${generationName(seq)}${mine}`);
  fs.mkdirSync(tmp);
  try {
    const snapshot = path.join(tmp, SNAPSHOT_FILE);
    linkOrCopy(plan.snapshotPath, snapshot);
    const crc = path.join(path.dirname(plan.snapshotPath), SNAPSHOT_CRC);
    if (readSnapshotCrc(crc, plan.snapshot.bytes)) linkOrCopy(crc, path.join(tmp, SNAPSHOT_CRC));
    else writeSnapshotCrc(snapshot, path.join(tmp, SNAPSHOT_CRC));
    const { pageSize } = plan.snapshot;
    const dbPages = Math.floor(fs.statSync(file).size / pageSize);
    const pages = [...written].filter((p) => p <= dbPages).sort((a, b) => a - b);
    // A file that only shrank still needs a commit to say its size: page 1 as it is.
    if (pages.length === 0 && dbPages !== plan.snapshot.pages) pages.push(1);
    const prepared: PreparedGeneration = { source, tmp, plan, seq };
    if (pages.length === 0) return prepared;
    fs.mkdirSync(path.join(tmp, SEGMENTS_DIR));
    const fd = fs.openSync(path.join(tmp, SEGMENTS_DIR, segmentName(1) + SEGMENT_DATA_EXT), 'w');
    const from = fs.openSync(file, 'r');
    try {
      const wrote = writeWal(fd, pageSize, pages, dbPages, randomBytes(8), (p, into) => {
        if (fs.readSync(from, into, 0, pageSize, (p - 1) * pageSize) !== pageSize) throw new Error(`${file} ended before page ${p}`);
      });
      fs.fsyncSync(fd);
      prepared.base = { ...wrote, dbPages };
    } finally {
      fs.closeSync(from);
      fs.closeSync(fd);
    }
    return prepared;
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Publishes a prepared generation as the newest of `dbPath`'s history, at `now`, sealed for the
 * file now in place (which must be the one it was prepared from, untouched since: the caller
 * renamed it in with no connection open on it). `began`: the restore's start, when its history
 * begins here (`SnapshotMeta.base`).
 */
export function publishGeneration(prepared: PreparedGeneration, dbPath: string, reason: 'first' | 'gap' | 'restore', now: number, began?: number): void {
  const { source, tmp, plan, base, seq } = prepared;
  const segment = base ? segmentName(1) : '';
  if (base) {
    const line: CommitRecord = { at: now, frames: base.frames, dbPages: base.dbPages, c1: base.c1, c2: base.c2 };
    const fd = fs.openSync(path.join(tmp, SEGMENTS_DIR, segment + SEGMENT_INDEX_EXT), 'w');
    try {
      // The index line is ASCII; a short count (read back as a torn tail, the base commit
      // gone from a published generation) is a throw like ENOSPC, and nothing is published.
      writeAll(fd, Buffer.from(commitLine(line)));
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    syncDir(path.join(tmp, SEGMENTS_DIR));
  }
  writeSeal(tmp, dbPath, segment, base?.frames ?? 0);
  const last = listGenerations(source).at(-1);
  const name = generationName(Math.max((last?.seq ?? 0) + 1, seq));
  const { sha256, bytes } = plan.snapshot;
  publish(tmp, path.join(source.generationsDir, name), name, last, reason, now, { sha256, bytes }, undefined, {
    crcWritten: true,
    // The same file as the snapshot it links: checked when that one was.
    checked: plan.snapshot.checked === true,
    ...(base ? { base: { segment, frames: base.frames, ...(began !== undefined ? { began } : {}) } } : {}),
  });
  syncDir(source.generationsDir);
}

/** Removes a prepared generation that will not be published (the restore went another way, or failed). */
export function discardGeneration(prepared: PreparedGeneration | undefined): void {
  if (prepared) fs.rmSync(prepared.tmp, { recursive: true, force: true });
}

function linkOrCopy(from: string, to: string): void {
  try {
    fs.linkSync(from, to);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Some mounts (FUSE, SMB) refuse links; another device cannot have them.
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS' && code !== 'EXDEV' && code !== 'EMLINK') throw err;
    fs.copyFileSync(from, to);
  }
}

/** Every page of `file`: what a base commit holds when what was written on top cannot be told. */
export function everyPage(file: string, pageSize: number): Set<number> {
  const n = Math.floor(fs.statSync(file).size / pageSize);
  return new Set(Array.from({ length: n }, (_, i) => i + 1));
}
