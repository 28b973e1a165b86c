import fs from 'node:fs';
import os from 'node:os';
import { lockHolders } from './lock-holders.ts';

// SQLite's WAL index header, as the -shm file holds it on disk (sqlite.org/walformat.html, "The
// WAL-Index Header"): two copies of 48 bytes, in the machine's byte order but for the salts, which
// are copied as the WAL's header has them (big-endian).
const HEADER = 48;
const WAL_HEADER = 32;
const FRAME_HEADER = 24;
const VERSION = 3007000;
const le = os.endianness() === 'LE';

/** What the WAL index header on disk says of the WAL's committed end. */
export interface EnteredEnd {
  pageSize: number;
  /** The last frame entered as committed (0: none). */
  lastFrame: number;
  salt1: number;
  salt2: number;
}

/**
 * The committed end the -shm of `dbPath` names, read from the file without SQLite (no connection
 * is needed, and none is disturbed: only a process with a connection loses its locks by closing a
 * descriptor). Undefined when there is no -shm, its two header copies differ or fail their
 * checksum (a writer stopped half way through it: SQLite recovers from the WAL then, and so
 * should we), or it may be older than this boot ({@link writtenThisBoot}).
 */
export function enteredEnd(dbPath: string): EnteredEnd | undefined {
  const shm = `${dbPath}-shm`;
  let fd: number;
  try {
    fd = fs.openSync(shm, 'r');
  } catch {
    return undefined;
  }
  const buf = Buffer.alloc(2 * HEADER);
  try {
    if (fs.readSync(fd, buf, 0, buf.length, 0) < buf.length || !writtenThisBoot(fs.fstatSync(fd).mtimeMs)) return undefined;
  } finally {
    fs.closeSync(fd);
  }
  if (!buf.subarray(0, HEADER).equals(buf.subarray(HEADER)) || u32(buf, 0) !== VERSION || buf[12] !== 1) return undefined;
  const [c1, c2] = nativeChecksum(buf, 40);
  if (c1 !== u32(buf, 40) || c2 !== u32(buf, 44)) return undefined;
  const size = le ? buf.readUInt16LE(14) : buf.readUInt16BE(14);
  return { pageSize: size === 1 ? 65536 : size, lastFrame: u32(buf, 16), salt1: buf.readUInt32BE(32), salt2: buf.readUInt32BE(36) };
}

/**
 * Cuts from the WAL of `dbPath` the frames its WAL index never entered as committed, before this
 * process opens the database through SQLite, when no connection anywhere has it open (none holds
 * a lock on its -shm). Returns the bytes cut (0: nothing to cut, or not known to be safe).
 *
 * SQLite can write a transaction's every frame, its commit frame included, and then fail to enter
 * them in the WAL index (its -shm cannot grow on a full disk: SQLITE_IOERR_SHMSIZE), or its
 * process can die between the two: either way the commit never answered ok, and the index's end
 * did not move. The connection that failed writes over them next (and `cutUncommittedTail` cuts
 * them at once); but a process SIGKILLed before either leaves them, and the first connection to
 * open the database after every other closed rebuilds the index from the WAL file, where they
 * chain and check like any commit: a write answered STORAGE_FULL, "nothing was written", would be
 * in the database after all (session 32, F9; F8 cut them only in the child that failed). A
 * commit that answered ok always moved the index's end first, so nothing past it was ever
 * acknowledged. The -shm's pages outlive the processes that mapped them (it is a shared file),
 * not a crash of the machine: {@link writtenThisBoot}.
 */
export function cutUnenteredTail(dbPath: string): number {
  try {
    const end = enteredEnd(dbPath);
    if (!end) return 0;
    const wal = `${dbPath}-wal`;
    const size = fs.statSync(wal, { throwIfNoEntry: false })?.size ?? 0;
    const entered = WAL_HEADER + end.lastFrame * (end.pageSize + FRAME_HEADER);
    if (size < entered + FRAME_HEADER || !tailOf(wal, end, entered) || connected(dbPath)) return 0;
    // No connection holds the WAL: SQLite takes no lock on the -wal itself, and the next to open
    // the database (this process, next) rebuilds the index from what is left.
    fs.truncateSync(wal, entered);
    return size - entered;
  } catch {
    return 0;
  }
}

/**
 * Whether the WAL at `wal` is the one the index header names (the same salts in its header) and
 * the frame at `entered` carries them too: one written after the index's end. Frames of the WAL's
 * earlier rounds (SQLite writes it from its start again after a checkpoint) carry older salts,
 * and no recovery takes them; most WALs longer than their end are that, and need no more look.
 */
function tailOf(wal: string, end: EnteredEnd, entered: number): boolean {
  const fd = fs.openSync(wal, 'r');
  try {
    const head = Buffer.alloc(WAL_HEADER);
    if (fs.readSync(fd, head, 0, WAL_HEADER, 0) < WAL_HEADER) return false;
    if (head.readUInt32BE(16) !== end.salt1 || head.readUInt32BE(20) !== end.salt2) return false;
    if (fs.readSync(fd, head, 0, FRAME_HEADER, entered) < FRAME_HEADER) return false;
    return head.readUInt32BE(8) === end.salt1 && head.readUInt32BE(12) === end.salt2;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Whether any process (this one included) holds a POSIX lock on the database's -shm: every open
 * connection in WAL mode holds one (its DMS byte), and its index is live, not rebuilt. Where that
 * cannot be read, taken as connected, and nothing is cut.
 */
function connected(dbPath: string): boolean {
  const holders = lockHolders(`${dbPath}-shm`);
  return holders === undefined || holders.size > 0;
}

/**
 * Whether a file last changed at `mtimeMs` changed since this machine booted. The first
 * connection to a database truncates its -shm (SQLite's `unixLockSharedMemory`), so an index
 * written this boot was written whole in this boot's memory; one older may have lost pages the
 * crash never wrote out, and its end could be behind commits that answered ok.
 */
function writtenThisBoot(mtimeMs: number): boolean {
  const boot = bootTimeMs();
  return boot !== undefined && mtimeMs >= boot;
}

let bootMs: number | undefined;
function bootTimeMs(): number | undefined {
  if (bootMs !== undefined) return bootMs;
  try {
    const line = /^btime (\d+)$/m.exec(fs.readFileSync('/proc/stat', 'latin1'));
    if (line) bootMs = Number(line[1]) * 1000;
  } catch {
    // Not Linux: no index on disk is trusted.
  }
  return bootMs;
}

function u32(buf: Buffer, at: number): number {
  return le ? buf.readUInt32LE(at) : buf.readUInt32BE(at);
}

/** SQLite's checksum over `buf[0, end)` in the machine's byte order, as the index header's. */
function nativeChecksum(buf: Buffer, end: number): [number, number] {
  let s1 = 0;
  let s2 = 0;
  for (let i = 0; i < end; i += 8) {
    s1 = (s1 + u32(buf, i) + s2) >>> 0;
    s2 = (s2 + u32(buf, i + 4) + s1) >>> 0;
  }
  return [s1, s2];
}
