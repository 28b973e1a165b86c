import fs from 'node:fs';
import type { Database } from 'better-sqlite3';

/**
 * Plain descriptors of the files SQLite connections of this process hold POSIX locks on — a
 * database's file and its -shm — by path, with the connections that read through each. Closing
 * any descriptor of a file lets go every POSIX lock the process holds on it, SQLite's own among
 * them (sqlite.org/howtocorrupt.html, 2.2), and SQLite cannot know; a worker thread's close is
 * the process's too. So agentdb reads such a file only through one descriptor per path, closed
 * once every connection that read through it is closed ({@link sweepKeptDescriptors}), never
 * while one is open.
 *
 * Session 30: a child closed its -shm descriptor after a failed copy (a full disk) and the
 * database file's after copying it into a snapshot; holding no lock on either, another process's
 * connection closing took itself for the last, checkpointed and deleted the WAL under the child's
 * open connection, whose next commits went into the deleted WAL: acknowledged, seen by no other
 * process, in no history. Session 31 (F7): the database file's alone was enough for a connection
 * elsewhere that takes the file whole (`locking_mode = EXCLUSIVE`, an operator's shell) — SQLite's
 * own last-connection check looks at the -shm, which such a connection does not use — and the
 * snapshot of a database's first capture, every night's, a gap's and a restore's header and page
 * reads all opened and closed the live file.
 */
const kept = new Map<string, Kept>();
/** Descriptors of a file since replaced at its path, kept until their readers close too. */
const replaced: Kept[] = [];

interface Kept {
  fd: number;
  users: Set<Database>;
}

/**
 * A read-only descriptor of `file`, kept open while `db` (a connection of this process to the
 * database `file` belongs to) or any other connection that read through it is open; undefined
 * when there is no such file. Never close it: {@link sweepKeptDescriptors} does, once it may.
 * With `sameFile`, the descriptor is checked to be of the file now at `file` (a stat each: for
 * the database file, read rarely); one of a file replaced since is kept for its readers, and a
 * new one opened.
 */
export function keptDescriptor(db: Database, file: string, sameFile = false): number | undefined {
  let open = kept.get(file);
  // A connection new to a descriptor whose readers are all closed (a handle closed outside the
  // cache, not swept yet): the file it names may be one the last of them deleted at its close.
  if (open && !open.users.has(db) && !someOpen(open)) {
    kept.delete(file);
    closeQuietly(open.fd);
    open = undefined;
  }
  if (open && sameFile && !isFileAt(open.fd, file)) {
    kept.delete(file);
    replaced.push(open);
    open = undefined;
  }
  if (!open) {
    sweepKeptDescriptors();
    try {
      open = { fd: fs.openSync(file, 'r'), users: new Set() };
    } catch {
      return undefined;
    }
    kept.set(file, open);
  }
  open.users.add(db);
  return open.fd;
}

/**
 * Closes the descriptors whose every reader's connection is closed: after a handle is closed
 * (`HistoryCapture`'s `afterClose`), and before another descriptor is opened.
 */
export function sweepKeptDescriptors(): void {
  for (const [file, open] of kept) {
    if (someOpen(open)) continue;
    kept.delete(file);
    closeQuietly(open.fd);
  }
  for (let i = replaced.length - 1; i >= 0; i--) {
    if (someOpen(replaced[i]!)) continue;
    closeQuietly(replaced[i]!.fd);
    replaced.splice(i, 1);
  }
}

/** Whether a connection that read through `open` is still open (forgetting those that are not). */
function someOpen(open: Kept): boolean {
  for (const db of open.users) if (!db.open) open.users.delete(db);
  return open.users.size > 0;
}

function isFileAt(fd: number, file: string): boolean {
  const now = fs.statSync(file, { throwIfNoEntry: false });
  const held = fs.fstatSync(fd);
  return now !== undefined && now.ino === held.ino && now.dev === held.dev;
}

function closeQuietly(fd: number): void {
  try {
    fs.closeSync(fd);
  } catch {
    // Already closed with the process's descriptors.
  }
}
