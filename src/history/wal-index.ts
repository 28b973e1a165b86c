import fs from 'node:fs';
import os from 'node:os';
import type { Database } from 'better-sqlite3';
import { keptDescriptor } from './kept-descriptors.ts';

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

const head = Buffer.alloc(40);
const le = os.endianness() === 'LE';

/**
 * The WAL index header of `dbPath` as connection `db` sees it, read through the process's one
 * descriptor of its -shm, kept open while any connection of this process that read it is open
 * (`kept-descriptors.ts`: closing one would let go SQLite's locks on the -shm); undefined when
 * there is none to read. Read through the file, not SQLite's mapping: both are the same pages.
 */
export function readWalIndex(db: Database, dbPath: string): WalIndexHeader | undefined {
  const fd = keptDescriptor(db, `${dbPath}-shm`);
  if (fd === undefined) return undefined;
  if (fs.readSync(fd, head, 0, head.length, 0) < head.length || head[12] !== 1) return undefined;
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
