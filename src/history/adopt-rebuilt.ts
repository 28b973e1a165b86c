import fs from 'node:fs';
import type { Database } from 'better-sqlite3';
import { hashOnThread, type PendingHash } from './hash-worker.ts';
import { keptDescriptor } from './kept-descriptors.ts';
import { writeAll } from './write-all.ts';

/**
 * A restore in place's rebuilt file, offered as the next generation's snapshot, with its
 * sha256 under way on another thread when its header was foreseen ({@link foreseeHeader}).
 */
export interface Rebuilt {
  file: string;
  foreseen?: Foreseen;
}

/** The hash under way, and the file's size and mtime when it began (nothing may write it since). */
export interface Foreseen {
  hashing: PendingHash;
  stamp: string;
}

/** How {@link adoptRebuilt} went: the file as it was, with page 1's header patched, or not at all. */
export type Adopted = 'exact' | 'patched' | false;

// Header fields of page 1 (https://www.sqlite.org/fileformat.html#the_database_header).
const CHANGE_COUNTER = 24;
const SCHEMA_COOKIE = 40;
const VERSION_VALID_FOR = 92;
const VERSION_NUMBER = 96;
const HEADER_BYTES = 100;

/**
 * Writes into `rebuilt` the header the backup API will leave in the live database `liveFile`
 * when it copies `rebuilt` in — the live change counter and schema cookie plus one, SQLite's
 * version — and starts hashing it on another thread, so the hash is ready when the file becomes
 * the new snapshot. The caller has just checkpointed the live WAL (after capturing it), so the
 * live header is the file's. A wrong guess costs only hashing after the swap, as without this:
 * {@link adoptRebuilt} compares page 1 whole.
 */
export function foreseeHeader(live: Database, liveFile: string, rebuilt: string): Foreseen {
  const head = readHeaderFd(liveDescriptor(live, liveFile));
  const [major, minor, patch] = (live.prepare('SELECT sqlite_version()').pluck().get() as string).split('.').map(Number);
  const fd = fs.openSync(rebuilt, 'r+');
  try {
    const out = readHeaderFd(fd);
    const counter = (head.readUInt32BE(CHANGE_COUNTER) + 1) >>> 0;
    out.writeUInt32BE(counter, CHANGE_COUNTER);
    out.writeUInt32BE(counter, VERSION_VALID_FOR);
    out.writeUInt32BE((head.readUInt32BE(SCHEMA_COOKIE) + 1) >>> 0, SCHEMA_COOKIE);
    out.writeUInt32BE(major! * 1_000_000 + minor! * 1000 + patch!, VERSION_NUMBER);
    // Written over bytes the file has: short only on a copy-on-write disk, and then a throw.
    writeAll(fd, out, HEADER_BYTES, 0);
  } finally {
    fs.closeSync(fd);
  }
  return { hashing: hashOnThread(rebuilt, true), stamp: stampOf(rebuilt) };
}

/**
 * Makes `rebuilt` (the file a restore copied into the live database `live` (open through the
 * connection `db`) with the backup API,
 * the live WAL since checkpointed) the snapshot at `to`, instead of copying the live file again:
 * the backup copies every page as it is except page 1's header (schema cookie, change counter,
 * size, version), so page 1 is taken from the live file, once the rest of page 1 and the size
 * are found the same. False, with nothing moved, when they are not (the caller copies then).
 * The caller holds the live database's write lock with its WAL empty.
 */
export function adoptRebuilt({ file: rebuilt, foreseen }: Rebuilt, db: Database, live: string, to: string): Adopted {
  const size = fs.statSync(live).size;
  if (fs.statSync(rebuilt, { throwIfNoEntry: false })?.size !== size) return false;
  // The live file is read through the process's kept descriptor, never closed here.
  const liveFd = liveDescriptor(db, live);
  const pageSize = pageSizeOf(readHeaderFd(liveFd));
  if (pageSizeOf(readHeader(rebuilt)) !== pageSize || size < pageSize) return false;
  const page = (fd: number) => {
    const b = Buffer.alloc(pageSize);
    fs.readSync(fd, b, 0, pageSize, 0);
    return { fd, b };
  };
  const a = page(liveFd);
  const r = page(fs.openSync(rebuilt, 'r+'));
  // 'exact' only for the bytes the thread hashed: foreseen, and not written since.
  let how: Adopted = foreseen && foreseen.stamp === stampOf(rebuilt) ? 'exact' : 'patched';
  try {
    // Past the 100-byte file header, page 1 is b-tree content the backup copies verbatim.
    if (!a.b.subarray(HEADER_BYTES).equals(r.b.subarray(HEADER_BYTES))) return false;
    if (!a.b.equals(r.b)) {
      writeAll(r.fd, a.b, pageSize, 0);
      how = 'patched';
    }
  } finally {
    fs.closeSync(r.fd);
  }
  try {
    fs.renameSync(rebuilt, to);
  } catch (err) {
    // History on a disk of its own (an operator's mount): the rebuilt file, in the databases'
    // folder, cannot be renamed into it. Thrown, the restore's generation fell back to a gap
    // marked lost, from the last commit to the restore, whose moments answered HISTORY_LOST
    // though history holds them whole (session 37, F18). The caller copies the live file.
    if ((err as NodeJS.ErrnoException).code === 'EXDEV') return false;
    throw err;
  }
  return how;
}

/**
 * The process's kept descriptor of the live database `file` that `db` has open: closing one of
 * its own would let go SQLite's lock on the file (see `kept-descriptors.ts`).
 */
function liveDescriptor(db: Database, file: string): number {
  const fd = keptDescriptor(db, file, true);
  if (fd === undefined) throw new Error(`${file} is gone`);
  return fd;
}

function readHeader(file: string): Buffer {
  const fd = fs.openSync(file, 'r');
  try {
    return readHeaderFd(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function readHeaderFd(fd: number): Buffer {
  const b = Buffer.alloc(HEADER_BYTES);
  if (fs.readSync(fd, b, 0, HEADER_BYTES, 0) < HEADER_BYTES) throw new Error('not a SQLite file: shorter than its header');
  return b;
}

/** The page size a header declares (1 means 65536). */
function pageSizeOf(header: Buffer): number {
  const v = header.readUInt16BE(16);
  return v === 1 ? 65536 : v;
}

function stampOf(file: string): string {
  const st = fs.statSync(file, { bigint: true });
  return `${st.size}|${st.mtimeNs}|${st.ino}`;
}
