import fs from 'node:fs';
import Database from 'better-sqlite3';
import { committedCall, type RecordedCall, type RecordedOutcome } from '../sqlite/call-record.ts';
import { enteredEnd } from '../sqlite/unentered-tail.ts';
import { type CommittedWalFrames, committedWalFrames, FRAME_HEADER_BYTES } from './wal-format.ts';

/**
 * The largest database read into memory to look for a record: a child's memory is bounded
 * (`dataLimitKiB`). Past it, whether the call committed is not known (see {@link committedInClosedFile}).
 */
const MAX_IN_MEMORY_BYTES = 128 * 1024 * 1024;

/**
 * Whether `call` committed in the database at `file`, read without opening the file through
 * SQLite: on a full disk a database whose handles all closed cannot be opened (its -shm and -wal
 * need room, SQLITE_IOERR_SHMSIZE), read-only included, and a write or drop run again there
 * answered STORAGE_FULL "nothing was written" for a call its first run had committed (session 31,
 * F8's fault ledger). The database as its commits left it is built in memory: the file, then
 * the WAL's committed frames over it (F8 read only a file whose WAL was empty, so a database whose
 * child had held it still answered so: session 32, F9), and opened there as a rollback-journal
 * database (the memory database has no -shm). `{ committed: false }` when there is no database.
 * Undefined when it cannot tell: a database past {@link MAX_IN_MEMORY_BYTES}, or any failure.
 */
export function committedInClosedFile(file: string, call: RecordedCall): RecordedOutcome | undefined {
  try {
    const size = fs.statSync(file, { throwIfNoEntry: false })?.size;
    if (size === undefined) return { committed: false };
    const image = committedImage(file, size);
    if (image === undefined) return undefined;
    if (image.length === 0) return { committed: false };
    // The header's file format versions (offsets 18 and 19): 2 is WAL, 1 a rollback journal.
    image[18] = 1;
    image[19] = 1;
    const db = new Database(image, { readonly: true });
    try {
      return committedCall(db, call);
    } finally {
      db.close();
    }
  } catch {
    return undefined;
  }
}

/**
 * The database at `file` (`size` bytes) with its WAL's committed frames applied, as the next
 * connection would see it: frames that chain from the WAL's header up to its last commit frame,
 * and not past the WAL index's end when an index this boot wrote names this WAL (a commit it
 * never entered never answered ok: `unentered-tail.ts`). Undefined when too big for memory.
 */
function committedImage(file: string, size: number): Buffer | undefined {
  const frames = committedFrames(`${file}-wal`);
  const pageSize = frames?.pageSize ?? pageSizeOf(file);
  const bytes = frames ? frames.pages * frames.pageSize : size;
  if (bytes > MAX_IN_MEMORY_BYTES || (bytes > 0 && pageSize === undefined)) return undefined;
  const image = Buffer.alloc(bytes);
  const fd = fs.openSync(file, 'r');
  try {
    for (let at = 0; at < Math.min(bytes, size); ) {
      const n = fs.readSync(fd, image, at, Math.min(bytes, size) - at, at);
      if (n === 0) break;
      at += n;
    }
  } finally {
    fs.closeSync(fd);
  }
  if (!frames) return image;
  const wal = fs.openSync(`${file}-wal`, 'r');
  try {
    for (const [pgno, offset] of frames.latest) {
      if (pgno > frames.pages) continue;
      fs.readSync(wal, image, (pgno - 1) * frames.pageSize, frames.pageSize, offset + FRAME_HEADER_BYTES);
    }
  } finally {
    fs.closeSync(wal);
  }
  return image;
}

/** The committed frames of the WAL at `wal`, not past the end a this-boot WAL index names for it; undefined with no commit. */
function committedFrames(wal: string): CommittedWalFrames | undefined {
  const entered = enteredEnd(wal.slice(0, -'-wal'.length));
  const found = committedWalFrames(wal, (hdr) =>
    entered && entered.salt1 === hdr.salt1 && entered.salt2 === hdr.salt2 ? entered.lastFrame : Number.POSITIVE_INFINITY,
  );
  return found && found.pages > 0 ? found : undefined;
}

/** The page size the database file's header names (offset 16, big-endian; 1 means 65536). */
function pageSizeOf(file: string): number | undefined {
  const fd = fs.openSync(file, 'r');
  try {
    const head = Buffer.alloc(18);
    if (fs.readSync(fd, head, 0, 18, 0) < 18) return undefined;
    const size = head.readUInt16BE(16);
    return size === 1 ? 65536 : size;
  } finally {
    fs.closeSync(fd);
  }
}
