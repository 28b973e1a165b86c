import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import type { Database } from 'better-sqlite3';
import type { HistorySource } from './history-files.ts';
import { readWalIndex } from './wal-index.ts';
import { writeAll } from './write-all.ts';

// A write is answered before its frames are copied into history (`lockForCapture`): the copy
// waits under the write lock, where nothing can commit or start the WAL over. Only a kill in
// between can stop it, and then whoever captures the database next copies the frames, but would
// stamp them with its own time: a restore to a moment between would leave out a write already
// answered. So the commit's time is written first, here, with where the commit ends in the WAL
// as SQLite's WAL index says it: the commit whose last frame that is, and any still uncopied
// before it, took place by then.

/** The file, beside a database's generations, holding the last commits answered before their copy. */
export const ANSWERED_FILE = 'answered.json';
/** Each record is written in place in its slot, always this long, so the file never needs truncating. */
const RECORD_BYTES = 160;
/**
 * Slots of the file, used in turn (40 KB, allocated when the file is made): a copy that fails
 * for a while (a full disk, issue 25) leaves many commits answered and not copied, and a restart
 * in between must still find each one's time. Written in place, a record needs no free space.
 * Past this many uncopied commits the oldest are written over, and take a later one's time.
 */
const RING = 256;

/** The last commit answered before it was copied: its WAL's salts, its commit frame and that frame's checksums. */
export interface Answered {
  salt1: number;
  salt2: number;
  /** The commit frame's number in the WAL (from 1), which is its number in the segment copying that WAL. */
  frame: number;
  c1: number;
  c2: number;
  at: number;
  /** Its number in the file's order (absent in files written before the file held several). */
  n?: number;
}

/**
 * The record file {@link noteAnswered} keeps open per connection, the generations folder it is
 * beside, the number of its next record, and whether it has all its slots (a file never shrinks
 * once it has: the fstat that asked was a system call per write, issue 31).
 */
const open = new WeakMap<Database, { gens: string; fd: number; next: number; ring: boolean }>();

function fileOf(source: HistorySource): string {
  return path.join(path.dirname(source.generationsDir), ANSWERED_FILE);
}

/**
 * Notes that the commit ending the WAL of `dbPath` now was answered at `at`, reading where it
 * ends from the WAL index (`readWalIndex`). Called right after this connection's commit, under
 * the write lock, so that commit is this connection's. Answers the WAL's size in bytes, or
 * undefined when nothing could be noted (then a copy after a kill takes its own time, as it did
 * before answers went first), with the record noted and the WAL index's change counter read for
 * it (under the write lock it stays so until the copy is done). Never throws.
 */
export function noteAnswered(
  db: Database,
  dbPath: string,
  source: HistorySource,
  at: number,
): { walBytes: number; noted: Answered; change: number } | undefined {
  try {
    const wal = readWalIndex(db, dbPath);
    if (!wal || wal.lastFrame === 0) return undefined;
    let kept = open.get(db);
    if (kept?.gens !== source.generationsDir) {
      closeAnswered(db);
      // Not truncated on open: records are always written whole, in place.
      const fd = fs.openSync(fileOf(source), fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644);
      const records = readRecords(fd);
      kept = { gens: source.generationsDir, fd, next: Math.max(-1, ...records.map((r) => r.n ?? 0)) + 1, ring: false };
      open.set(db, kept);
      allocate(fd);
    }
    const noted: Answered = { salt1: wal.salt1, salt2: wal.salt2, frame: wal.lastFrame, c1: wal.c1, c2: wal.c2, at, n: kept.next };
    kept.ring ||= fs.fstatSync(kept.fd).size >= RING * RECORD_BYTES;
    const slot = kept.next % (kept.ring ? RING : 1);
    // Whole or a throw (a write cut short leaves the slot torn, which its sum then refuses).
    writeAll(kept.fd, recordSlot(noted), RECORD_BYTES, slot * RECORD_BYTES);
    kept.next++;
    return { walBytes: 32 + wal.lastFrame * (wal.pageSize + 24), noted, change: wal.change };
  } catch {
    closeAnswered(db);
    return undefined;
  }
}

/** Closes what {@link noteAnswered} keeps open for a connection (its handle closes). */
export function closeAnswered(db: Database): void {
  const kept = open.get(db);
  if (!kept) return;
  open.delete(db);
  try {
    fs.closeSync(kept.fd);
  } catch {
    // Already closed with the process's descriptors: nothing to keep.
  }
}

/** The last commit answered before its copy, or undefined (none, or a record cut short). */
export function readAnswered(source: HistorySource): Answered | undefined {
  return readAllAnswered(source).at(-1);
}

/** Every commit the file holds as answered, oldest first (see {@link RING}). */
export function readAllAnswered(source: HistorySource): Answered[] {
  let fd: number;
  try {
    fd = fs.openSync(fileOf(source), 'r');
  } catch {
    return [];
  }
  try {
    return readRecords(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * A record as its slot holds it: its sum `k` first, then the record. A slot is written over in
 * place, and a 160-byte slot can straddle a page (slot 25 lies across 4,096): a crash, or a
 * full copy-on-write disk taking part of the write, can leave it the new record's first bytes
 * and the old one's last. With the fields of both of one length, that read as a record of
 * neither (session 34, F11: the new one's frame, the old one's checksums, a time of digits of
 * both): the sum, over every field, refuses it. First in the slot, so a new head over an old
 * record brings its sum with it, and an old head over a new tail carries an old sum that does
 * not match.
 */
export function recordText(a: Answered): string {
  return `${JSON.stringify({ k: recordSum(a), ...a })}`.padEnd(RECORD_BYTES - 1) + '\n';
}

/** The one slot's bytes {@link recordSlot} fills, written before the next is made (the child is single-threaded). */
const slotBytes = Buffer.alloc(RECORD_BYTES, 0x20);

/**
 * {@link recordText}'s bytes for a record as {@link noteAnswered} makes it (its fields all
 * numbers, `n` set, in that order), built by hand into one kept buffer: the object spread,
 * `JSON.stringify`, the padding and a new Buffer per write were ~1.2 of ~2.2 µs of the answered
 * note, on the path of every write's answer (issue 31). Anything else takes {@link recordText}.
 */
export function recordSlot(a: Answered): Buffer {
  if (a.n === undefined) return Buffer.from(recordText(a));
  const text = `{"k":${recordSum(a)},"salt1":${a.salt1},"salt2":${a.salt2},"frame":${a.frame},"c1":${a.c1},"c2":${a.c2},"at":${a.at},"n":${a.n}}`;
  if (text.length > RECORD_BYTES - 1) return Buffer.from(recordText(a));
  slotBytes.fill(0x20, slotBytes.write(text, 0, 'latin1'), RECORD_BYTES - 1);
  slotBytes[RECORD_BYTES - 1] = 0x0a;
  return slotBytes;
}

function recordSum(a: Partial<Answered>): number {
  return zlib.crc32(`${a.salt1},${a.salt2},${a.frame},${a.c1},${a.c2},${a.at},${a.n}`);
}

/**
 * Records of the slots read, those torn refused. A record without a sum (written before sums
 * were added) is read as before, only from a file no record with a sum is in yet: once one is,
 * the file is being written over by this version, and a slot without a sum is one torn across
 * an old record (`recordText`).
 */
function readRecords(fd: number): Answered[] {
  const buf = Buffer.alloc(RING * RECORD_BYTES);
  const got = fs.readSync(fd, buf, 0, buf.length, 0);
  const summed: Answered[] = [];
  const unsummed: Answered[] = [];
  let sums = false;
  for (let at = 0; at + 1 < got; at += RECORD_BYTES) {
    const text = buf.toString('utf8', at, Math.min(got, at + RECORD_BYTES)).trim();
    if (!text) continue;
    try {
      const { k, ...record } = JSON.parse(text) as Partial<Answered> & { k?: unknown };
      if (![record.salt1, record.salt2, record.frame, record.c1, record.c2, record.at].every((n) => typeof n === 'number')) continue;
      if (k === undefined) unsummed.push(record as Answered);
      else {
        sums = true;
        if (k === recordSum(record)) summed.push(record as Answered);
      }
    } catch {
      // A slot cut short by a crash: that one record is lost, as the single one was before.
    }
  }
  return (sums ? summed : unsummed).sort((a, b) => (a.n ?? 0) - (b.n ?? 0));
}

/** Gives the file all its slots (blank), while there is room; without it, slot 0 alone is used. */
function allocate(fd: number): void {
  const size = fs.fstatSync(fd).size;
  if (size >= RING * RECORD_BYTES) return;
  const from = Math.ceil(size / RECORD_BYTES) * RECORD_BYTES;
  const blank = Buffer.alloc(RING * RECORD_BYTES - from, 0x20);
  for (let i = RECORD_BYTES - 1; i < blank.length; i += RECORD_BYTES) blank[i] = 0x0a;
  try {
    // A write cut short would leave the file part allocated and taken for slot 0's alone.
    writeAll(fd, blank, blank.length, from);
  } catch {
    // A full disk: slot 0 goes on being written in place.
    fs.ftruncateSync(fd, Math.max(size, Math.min(from, RECORD_BYTES)));
  }
}
