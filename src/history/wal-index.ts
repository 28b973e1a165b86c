import fs from 'node:fs';
import os from 'node:os';
import type { Database } from 'better-sqlite3';

// SQLite's WAL index: the first 48 bytes of a database's -shm file are the header every
// connection reads a transaction's view from (sqlite.org/walformat.html, "The WAL-Index Header").
// Its fields are in the machine's byte order, except the salts, copied as the WAL's header has them.

/** What capture reads of the WAL index header. */
export interface WalIndexHeader {
  /** Counter of transactions committed: moves with every commit, whoever made it, not with checkpoints. */
  change: number;
  /** The page size, in bytes. */
  pageSize: number;
  /** The last committed frame of the WAL (0: none). */
  lastFrame: number;
  /** That frame's checksums. */
  c1: number;
  c2: number;
  salt1: number;
  salt2: number;
}

/**
 * The -shm descriptors this process reads WAL index headers through, by database path, with the
 * connections that read through each. One is closed only once every one of those connections is
 * closed ({@link sweepWalIndexes}), never while one is open: closing any descriptor of a file lets
 * go every POSIX lock the process holds on it, SQLite's own among them (sqlite.org/howtocorrupt.html,
 * 2.2). A child that closed its -shm descriptor after a failed copy (a full disk), and the database
 * file's after copying it into a snapshot, held no lock on either: another process's connection
 * closing then took itself for the last, checkpointed and deleted the WAL and -shm under the
 * child's open connection, whose next commits went into the deleted WAL, seen by no other process,
 * copied into history by nothing, and acknowledged all the same (F6's and G8's restores that
 * answered ok without acknowledged rows, session 30).
 */
const shms = new Map<string, { fd: number; users: Set<Database> }>();
const head = Buffer.alloc(40);
const le = os.endianness() === 'LE';

/**
 * The WAL index header of `dbPath` as connection `db` sees it, read through a descriptor of its
 * -shm kept open while any connection of this process that read it is open (see {@link shms});
 * undefined when there is none to read. Read through the file, not SQLite's mapping: both are the
 * same pages.
 */
export function readWalIndex(db: Database, dbPath: string): WalIndexHeader | undefined {
  let open = shms.get(dbPath);
  // A connection new to a descriptor whose readers are all closed (a handle closed outside the
  // cache, not swept yet): the -shm it names may be one the last of them deleted at its close.
  if (open && !open.users.has(db) && ![...open.users].some((user) => user.open)) {
    shms.delete(dbPath);
    closeQuietly(open.fd);
    open = undefined;
  }
  if (!open) {
    sweepWalIndexes();
    try {
      open = { fd: fs.openSync(`${dbPath}-shm`, 'r'), users: new Set() };
    } catch {
      return undefined;
    }
    shms.set(dbPath, open);
  }
  open.users.add(db);
  if (fs.readSync(open.fd, head, 0, head.length, 0) < head.length || head[12] !== 1) return undefined;
  const u32 = (at: number) => (le ? head.readUInt32LE(at) : head.readUInt32BE(at));
  const size = le ? head.readUInt16LE(14) : head.readUInt16BE(14);
  return {
    change: u32(8),
    pageSize: size === 1 ? 65536 : size,
    lastFrame: u32(16),
    c1: u32(24),
    c2: u32(28),
    salt1: head.readUInt32BE(32),
    salt2: head.readUInt32BE(36),
  };
}

/**
 * Closes the -shm descriptors whose every reader's connection is closed: after a handle is
 * closed (`HistoryCapture`'s `afterClose`), and before another is opened.
 */
export function sweepWalIndexes(): void {
  for (const [path, open] of shms) {
    for (const db of open.users) if (!db.open) open.users.delete(db);
    if (open.users.size > 0) continue;
    shms.delete(path);
    closeQuietly(open.fd);
  }
}

function closeQuietly(fd: number): void {
  try {
    fs.closeSync(fd);
  } catch {
    // Already closed with the process's descriptors.
  }
}
