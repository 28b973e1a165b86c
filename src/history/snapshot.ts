import { createHash, type Hash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Database } from 'better-sqlite3';
import {
  GENERATION_END,
  SNAPSHOT_FILE,
  SNAPSHOT_META,
  generationName,
  listGenerations,
  writeJsonAtomic,
  type GenerationEnd,
  type HistoryPosition,
  type HistorySource,
  type SnapshotMeta,
} from './history-files.ts';
import { adoptRebuilt, type Adopted, type Rebuilt } from './adopt-rebuilt.ts';
import { chunkSumsOnThread, hashOnThread, hashedOrUndefined } from './hash-worker.ts';
import { integrityProblem } from './integrity.ts';
import { keptDescriptor } from './kept-descriptors.ts';
import { alive } from './reader-markers.ts';
import { CRC_CHUNK, SNAPSHOT_CRC, writeSnapshotCrc, writeSums } from './snapshot-crc.ts';
import { syncFile } from './file-sync.ts';
import { writeSeal } from './seal.ts';
import { syncNewestSegment } from './segment-sync.ts';
import { writeAll } from './write-all.ts';

const CHUNK = 1024 * 1024;
/** From this size a copy's sha256 is computed on a worker thread (starting one costs milliseconds). */
const THREAD_BYTES = 16 * 1024 * 1024;

/**
 * Copies `from` to `to` in chunks, returning the sha256 and size of what was copied (one read
 * of the file, never all of it in memory). Synchronous: it runs in the executor child between
 * two statements, which is exactly when nothing else may touch the file.
 *
 * `live`: `from` is the database this connection of the process has open, read through the
 * process's kept descriptor of it (`keptDescriptor`), never one opened and closed here: that
 * close would let go SQLite's lock on the file (see `kept-descriptors.ts`).
 */
export function copyWithSha256(from: string, to: string, live?: Database): { sha256: string; bytes: number } {
  const kept = live ? keptDescriptor(live, from, true) : undefined;
  if (live && kept === undefined) throw new Error(`${from} is gone: nothing to snapshot`);
  // A large file is hashed on the other core while this one (or the kernel) copies it: hashing
  // alone costs about twice the copy. Both read the same file, which nothing writes meanwhile.
  if ((fs.statSync(from, { throwIfNoEntry: false })?.size ?? 0) >= THREAD_BYTES) {
    const hashing = hashOnThread(from, false, kept);
    if (kept === undefined) fs.copyFileSync(from, to);
    else copyFrom(kept, to, undefined);
    syncFile(to);
    const hashed = hashedOrUndefined(hashing);
    if (hashed && hashed.bytes === fs.statSync(to).size) return hashed;
  }
  const hash = createHash('sha256');
  const src = kept ?? fs.openSync(from, 'r');
  try {
    return { bytes: copyFrom(src, to, hash), sha256: hash.digest('hex') };
  } finally {
    if (kept === undefined) fs.closeSync(src);
  }
}

/** Copies everything readable through `src` to a new file `to`, hashing it into `hash` and syncing `to` when given one; returns the bytes. */
function copyFrom(src: number, to: string, hash: Hash | undefined): number {
  const buf = Buffer.allocUnsafe(CHUNK);
  const dst = fs.openSync(to, 'w');
  let bytes = 0;
  try {
    for (;;) {
      const n = fs.readSync(src, buf, 0, CHUNK, bytes);
      if (n === 0) break;
      hash?.update(buf.subarray(0, n));
      writeAll(dst, buf, n, bytes);
      bytes += n;
    }
    if (hash) fs.fsyncSync(dst);
  } finally {
    fs.closeSync(dst);
  }
  return bytes;
}

/**
 * The sha256 and size of `file`, then fsync: a snapshot must be on disk before its generation
 * appears, since a restore's own commit is in no history but its new generation's snapshot.
 */
export function hashAndSync(file: string): { sha256: string; bytes: number } {
  const sha256 = sha256File(file);
  syncFile(file);
  return { sha256, bytes: fs.statSync(file).size };
}

/** The sha256 (hex) of a file, read in chunks. */
export function sha256File(file: string): string {
  const hash = createHash('sha256');
  const buf = Buffer.allocUnsafe(CHUNK);
  const fd = fs.openSync(file, 'r');
  try {
    for (let pos = 0; ; ) {
      const n = fs.readSync(fd, buf, 0, CHUNK, pos);
      if (n === 0) break;
      hash.update(buf.subarray(0, n));
      pos += n;
    }
  } finally {
    fs.closeSync(fd);
  }
  return hash.digest('hex');
}

/** The page size a SQLite file's header declares (1 in the header means 65536). */
export function headerPageSize(file: string): number {
  const fd = fs.openSync(file, 'r');
  try {
    const b = Buffer.alloc(2);
    fs.readSync(fd, b, 0, 2, 16);
    const v = b.readUInt16BE(0);
    return v === 1 ? 65536 : v;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Starts a new generation of `dbPath`'s history from a page-exact snapshot: the WAL is
 * checkpointed into the file (TRUNCATE: the WAL is then empty), the file is copied under the
 * write lock so no commit can land in between, and the generation appears whole (written under
 * a temporary name, then renamed). The previous generation is marked ended.
 *
 * Whatever the WAL held and capture had not copied goes into the snapshot: the caller copies
 * first when those frames matter (a nightly snapshot), not when they cannot be trusted (a gap).
 * With `rebuilt` (a restore in place: the file it just copied in), that file becomes the
 * snapshot when it matches the live one, which saves writing 100 MB again; it is moved, not copied.
 * With `follows`, the caller copied and checkpointed every frame up to that position of the
 * previous generation just before, having read `PRAGMA data_version` before it began: the
 * snapshot records the position (see `SnapshotMeta.follows`) only when no other connection
 * committed since that read, as seen under the write lock. A commit that landed after the
 * caller's checkpoint is folded into the file by the checkpoint here, uncaptured: the snapshot
 * then holds more than that position, and a restore reading across it would keep that commit.
 * With `lost`, commits may have been made since the previous generation's last that no history
 * holds (SnapshotMeta.lost).
 * @throws Error when the checkpoint cannot complete (another connection reads) — capture tries
 * again on the next commit.
 */
export function startGeneration(
  db: Database,
  dbPath: string,
  source: HistorySource,
  reason: SnapshotMeta['reason'],
  now: number,
  rebuilt?: Rebuilt,
  follows?: Follows,
  lost?: boolean,
): SnapshotMeta {
  const gens = listGenerations(source);
  const last = gens.at(-1);
  const name = generationName((last?.seq ?? 0) + 1);
  const dir = path.join(source.generationsDir, name);
  const tmp = `${dir}.${process.pid}.tmp`;
  removeDeadTemps(source.generationsDir);
  fs.mkdirSync(tmp, { recursive: true });
  try {
    // The checkpoint folds the last generation's WAL into the file: its segment first (`syncSegment`).
    syncNewestSegment(source.generationsDir);
    const [res] = db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
    if (res?.busy) throw new Error(`could not checkpoint ${dbPath} to snapshot it: another connection is reading`);
    db.prepare('BEGIN IMMEDIATE').run();
    let copied: { sha256: string; bytes: number } | undefined;
    let adopted: Adopted = false;
    let exact: HistoryPosition | undefined;
    try {
      exact = follows && dataVersion(db) === follows.dataVersion ? follows.position : undefined;
      const wal = fs.statSync(`${dbPath}-wal`, { throwIfNoEntry: false });
      if (wal && wal.size > 0) throw new Error(`${dbPath} committed between checkpoint and snapshot`);
      adopted = rebuilt ? adoptRebuilt(rebuilt, db, dbPath, path.join(tmp, SNAPSHOT_FILE)) : false;
      copied = adopted ? undefined : copyWithSha256(dbPath, path.join(tmp, SNAPSHOT_FILE), db);
      // Still under the write lock, with the WAL empty: the file is the snapshot, so a WAL that
      // next starts with new salts (every connection closed meanwhile) continues this generation.
      writeSeal(tmp, dbPath, '', 0);
    } finally {
      db.prepare('ROLLBACK').run();
    }
    // The adopted file is no longer the live database's: hashed outside the lock, or already
    // on another thread when the header was foreseen exactly.
    copied ??= (adopted === 'exact' && rebuilt?.foreseen && hashedOrUndefined(rebuilt.foreseen.hashing)) || hashAndSync(path.join(tmp, SNAPSHOT_FILE));
    return publish(tmp, dir, name, last, reason, now, copied, exact, { lost: lost === true });
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}

/** What a caller that captured everything first hands to {@link startGeneration}. */
export interface Follows {
  position: HistoryPosition;
  /** `PRAGMA data_version` of the same connection, read before that capture. */
  dataVersion: number;
}

/** Changes whenever another connection (of any process) commits; this connection's own commits and checkpoints leave it. */
export function dataVersion(db: Database): number {
  return db.pragma('data_version', { simple: true }) as number;
}

/**
 * Writes a generation's snapshot.json (and, unless `crcWritten`, its chunk checksums, and checks
 * the snapshot with `PRAGMA quick_check`; otherwise it is `checked` when the caller says so),
 * makes it appear whole (renamed in) and ends the one before.
 */
export function publish(
  tmp: string,
  dir: string,
  name: string,
  last: { dir: string; name?: string } | undefined,
  reason: SnapshotMeta['reason'],
  now: number,
  copied: { sha256: string; bytes: number },
  follows?: HistoryPosition,
  extra: { crcWritten?: boolean; checked?: boolean; base?: SnapshotMeta['base']; lost?: boolean } = {},
): SnapshotMeta {
  const snapshot = path.join(tmp, SNAPSHOT_FILE);
  let checked = extra.checked === true;
  if (!extra.crcWritten) {
    // The chunk checksums on the other core while this one checks the file (from the size a
    // thread is worth starting for): making a snapshot takes no longer, and a restore from it
    // need not check what it builds (`Rebuilt.sound`).
    const summing = copied.bytes >= THREAD_BYTES ? chunkSumsOnThread(snapshot, CRC_CHUNK) : undefined;
    checked = integrityProblem(snapshot) === undefined;
    let sums: number[] | undefined;
    try {
      sums = summing?.result();
    } catch {
      sums = undefined;
    }
    if (sums) writeSums(path.join(tmp, SNAPSHOT_CRC), sums);
    else writeSnapshotCrc(snapshot, path.join(tmp, SNAPSHOT_CRC));
  }
  const pageSize = headerPageSize(snapshot);
  // After the check: its connection must have changed nothing, and this is the file a restore finds.
  const written = fs.statSync(snapshot);
  const meta: SnapshotMeta = {
    id: name,
    generation: name,
    at: now,
    sha256: copied.sha256,
    bytes: copied.bytes,
    pageSize,
    pages: Math.floor(copied.bytes / pageSize),
    reason,
    verified: { size: written.size, mtimeMs: written.mtimeMs },
    ...(checked ? { checked: true as const } : {}),
    ...(follows && last?.name === follows.generation ? { follows } : {}),
    ...(extra.base ? { base: extra.base } : {}),
    ...(extra.lost ? { lost: true as const } : {}),
  };
  writeJsonAtomic(path.join(tmp, SNAPSHOT_META), meta);
  fs.renameSync(tmp, dir);
  if (last) writeJsonAtomic(path.join(last.dir, GENERATION_END), { endedAt: now, next: name } satisfies GenerationEnd);
  return meta;
}

/**
 * Removes generation folders a process that died left half made (`g….<pid>.tmp`: a crash
 * between creating one and renaming it in, or `g….<pid>.linked.tmp`, a restore's generation
 * prepared before the restored file went in place); a living process's are its own business.
 * This process's own plain ones are removed too (it makes one at a time, and a failed one may
 * be left), but never its prepared restore generations: a capture that begins a generation
 * while the restore closes the database (a gap: a program outside wrote) runs between the
 * restore preparing its generation and publishing it, and removing it there failed the restore
 * after it had put the restored file in place.
 */
export function removeDeadTemps(generationsDir: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(generationsDir);
  } catch {
    return;
  }
  for (const name of names) {
    const m = /^g\d+\.(\d+)(\.linked)?\.tmp$/.exec(name);
    if (!m) continue;
    const pid = Number(m[1]);
    if (pid === process.pid ? m[2] !== undefined : alive(pid)) continue;
    fs.rmSync(path.join(generationsDir, name), { recursive: true, force: true });
  }
}
