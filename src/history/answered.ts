import fs from 'node:fs';
import path from 'node:path';
import type { Database } from 'better-sqlite3';
import type { State } from './capture-state.ts';
import type { HistorySource } from './layout.ts';

// A write is answered before its frames are copied into history (`lockForCapture`): the copy
// waits under the write lock, where nothing can commit or start the WAL over. Only a kill in
// between can stop it, and then whoever captures the database next copies the frames, but would
// stamp them with its own time: a restore to a moment between would leave out a write already
// answered. So the commit's time is written first, here, with where history ended then: the
// commit that follows that place is the one answered.

/** The file, beside a database's generations, holding the last commit answered before its copy. */
export const ANSWERED_FILE = 'answered.json';
/** Written in place at offset 0, always this long, so it never needs truncating. */
const RECORD_BYTES = 160;

/** The last commit answered before it was copied: made at `at`, right after history's end then. */
export interface Answered {
  gen: string;
  seg: string;
  frames: number;
  c1: number;
  c2: number;
  at: number;
}

const fds = new WeakMap<Database, { file: string; fd: number }>();

function fileOf(source: HistorySource): string {
  return path.join(path.dirname(source.generationsDir), ANSWERED_FILE);
}

/**
 * Notes that the commit following history's end as this process knows it (`st`) was made at
 * `at`. Best effort: with no record (no history yet, a full disk), a copy after a kill takes its
 * own time, as it did before answers went first. Never throws (the caller holds the write lock).
 */
export function noteAnswered(db: Database, source: HistorySource, st: State | undefined, at: number): void {
  const seg = st?.seg;
  if (!st || !seg) return;
  try {
    const file = fileOf(source);
    let open = fds.get(db);
    if (open?.file !== file) {
      closeAnswered(db);
      // Not truncated on open: the record is always written whole, in place.
      open = { file, fd: fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644) };
      fds.set(db, open);
    }
    const record: Answered = { gen: st.genName, seg: seg.name, frames: seg.frames, c1: seg.c1, c2: seg.c2, at };
    fs.writeSync(open.fd, JSON.stringify(record).padEnd(RECORD_BYTES - 1) + '\n', 0);
  } catch {
    closeAnswered(db);
  }
}

/** Closes what {@link noteAnswered} keeps open for a connection (its handle closes). */
export function closeAnswered(db: Database): void {
  const open = fds.get(db);
  if (!open) return;
  fds.delete(db);
  try {
    fs.closeSync(open.fd);
  } catch {
    // Already closed with the process's descriptors: nothing to keep.
  }
}

/**
 * The time of the commit right after history's end (`st`), when one was answered there before
 * its copy; undefined otherwise (nothing answered there, or a record cut short).
 */
export function answeredAfter(source: HistorySource, st: State): number | undefined {
  const seg = st.seg;
  if (!seg) return undefined;
  let record: Partial<Answered>;
  try {
    record = JSON.parse(fs.readFileSync(fileOf(source), 'utf8')) as Partial<Answered>;
  } catch {
    return undefined;
  }
  const here = record.gen === st.genName && record.seg === seg.name && record.frames === seg.frames && record.c1 === seg.c1 && record.c2 === seg.c2;
  return here && typeof record.at === 'number' ? record.at : undefined;
}
