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

const fds = new WeakMap<Database, { path: string; fd: number }>();
const head = Buffer.alloc(40);
const le = os.endianness() === 'LE';

/**
 * The WAL index header of `dbPath` as connection `db` sees it, its -shm kept open with the handle
 * (SQLite keeps the file while any connection has the database open); undefined when there is
 * none to read. Read through the file, not SQLite's mapping: both are the same pages.
 */
export function readWalIndex(db: Database, dbPath: string): WalIndexHeader | undefined {
  let open = fds.get(db);
  if (open?.path !== dbPath) {
    closeWalIndex(db);
    try {
      open = { path: dbPath, fd: fs.openSync(`${dbPath}-shm`, 'r') };
    } catch {
      return undefined;
    }
    fds.set(db, open);
  }
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

/** Closes the -shm {@link readWalIndex} keeps open for a connection (its handle closes). */
export function closeWalIndex(db: Database): void {
  const open = fds.get(db);
  if (!open) return;
  fds.delete(db);
  try {
    fs.closeSync(open.fd);
  } catch {
    // Already closed with the process's descriptors.
  }
}
