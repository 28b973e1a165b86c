import fs from 'node:fs';
import path from 'node:path';
import type { Database } from 'better-sqlite3';
import type { HistorySource } from './layout.ts';
import { readWalIndex } from './wal-index.ts';

// A write is answered before its frames are copied into history (`lockForCapture`): the copy
// waits under the write lock, where nothing can commit or start the WAL over. Only a kill in
// between can stop it, and then whoever captures the database next copies the frames, but would
// stamp them with its own time: a restore to a moment between would leave out a write already
// answered. So the commit's time is written first, here, with where the commit ends in the WAL
// as SQLite's WAL index says it: the commit whose last frame that is, and any still uncopied
// before it, took place by then.

/** The file, beside a database's generations, holding the last commit answered before its copy. */
export const ANSWERED_FILE = 'answered.json';
/** Written in place at offset 0, always this long, so it never needs truncating. */
const RECORD_BYTES = 160;

/** The last commit answered before it was copied: its WAL's salts, its commit frame and that frame's checksums. */
export interface Answered {
  salt1: number;
  salt2: number;
  /** The commit frame's number in the WAL (from 1), which is its number in the segment copying that WAL. */
  frame: number;
  c1: number;
  c2: number;
  at: number;
}

/** The record file {@link noteAnswered} keeps open per connection. */
const open = new WeakMap<Database, { record: string; fd: number }>();

function fileOf(source: HistorySource): string {
  return path.join(path.dirname(source.generationsDir), ANSWERED_FILE);
}

/**
 * Notes that the commit ending the WAL of `dbPath` now was answered at `at`, reading where it
 * ends from the WAL index (`readWalIndex`). Called right after this connection's commit, under
 * the write lock, so that commit is this connection's. Answers the WAL's size in bytes, or
 * undefined when nothing could be noted (then a copy after a kill takes its own time, as it did
 * before answers went first). Never throws.
 */
export function noteAnswered(db: Database, dbPath: string, source: HistorySource, at: number): number | undefined {
  try {
    const wal = readWalIndex(db, dbPath);
    if (!wal || wal.lastFrame === 0) return undefined;
    const record = fileOf(source);
    let kept = open.get(db);
    if (kept?.record !== record) {
      closeAnswered(db);
      // Not truncated on open: the record is always written whole, in place.
      kept = { record, fd: fs.openSync(record, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644) };
      open.set(db, kept);
    }
    const noted: Answered = { salt1: wal.salt1, salt2: wal.salt2, frame: wal.lastFrame, c1: wal.c1, c2: wal.c2, at };
    fs.writeSync(kept.fd, JSON.stringify(noted).padEnd(RECORD_BYTES - 1) + '\n', 0);
    return 32 + wal.lastFrame * (wal.pageSize + 24);
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
  try {
    const record = JSON.parse(fs.readFileSync(fileOf(source), 'utf8')) as Partial<Answered>;
    const ok = [record.salt1, record.salt2, record.frame, record.c1, record.c2, record.at].every((n) => typeof n === 'number');
    return ok ? (record as Answered) : undefined;
  } catch {
    return undefined;
  }
}
