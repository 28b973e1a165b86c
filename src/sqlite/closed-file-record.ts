import fs from 'node:fs';
import Database from 'better-sqlite3';
import { committedCall, type RecordedCall, type RecordedOutcome } from './call-record.ts';

/**
 * The largest file read whole into memory to look for a record: a child's memory is bounded
 * (`dataLimitKiB`), and a database past this stays unanswered (STORAGE_FULL, as before).
 */
const MAX_IN_MEMORY_BYTES = 128 * 1024 * 1024;

/**
 * Whether `call` committed in the database at `file`, read without opening the file through
 * SQLite: on a full disk a database whose handles all closed cannot be opened (its -shm and -wal
 * need room, SQLITE_IOERR_SHMSIZE), read-only included, and a write or drop run again there
 * answered STORAGE_FULL "nothing was written" for a call its first run had committed (session 31,
 * F8's fault ledger). Only a file whose WAL is empty or gone holds every commit: its copy in
 * memory, marked as a rollback-journal database (the memory database has no -shm), is read.
 * Undefined when that cannot tell: a WAL with frames, a file too big, or any failure.
 */
export function committedInClosedFile(file: string, call: RecordedCall): RecordedOutcome | undefined {
  try {
    if ((fs.statSync(`${file}-wal`, { throwIfNoEntry: false })?.size ?? 0) > 0) return undefined;
    const size = fs.statSync(file, { throwIfNoEntry: false })?.size;
    if (size === undefined || size === 0 || size > MAX_IN_MEMORY_BYTES) return undefined;
    const image = fs.readFileSync(file);
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
