import fs from 'node:fs';
import type { Database, Statement } from 'better-sqlite3';
import { closeAnswered } from './answered-commits.ts';
import { positionKey, type State } from './capture-state.ts';
import { readWalIndex } from './wal-index.ts';
import { sweepKeptDescriptors } from './kept-descriptors.ts';

// What capture keeps per SQLite connection: its WAL held open, the statements of its write lock,
// and how its last capture ended.

/**
 * The live WAL of `db`'s file, opened once per handle: while a connection is open SQLite keeps
 * its -wal (restarting or truncating it in place, never replacing it; only the last close
 * deletes it), so the descriptor stays right until the handle closes, when `captureBeforeClose`
 * closes it. Opening and closing it on each commit were two of a capture's system calls.
 */
const wals = new WeakMap<Database, OpenWal>();

/** A live WAL held open, with the salts and checksum its header had when last read. */
interface OpenWal {
  path: string;
  fd: number;
  salt1?: number;
  salt2?: number;
  c1?: number;
  c2?: number;
}

export function walOf(db: Database, dbPath: string): OpenWal | undefined {
  const known = wals.get(db);
  if (known?.path === dbPath) return known;
  if (known) closeWal(db);
  try {
    const wal = { path: dbPath, fd: fs.openSync(`${dbPath}-wal`, 'r') };
    wals.set(db, wal);
    return wal;
  } catch {
    return undefined;
  }
}

/** Connections whose WAL was found deleted under them: remembered past their WAL's descriptor. */
const deadWals = new WeakSet<Database>();

/**
 * Whether the WAL `db` writes was deleted under it, as this connection's capture holds it open:
 * another connection took itself for the database's last (this process's locks were gone, see
 * `kept-descriptors.ts`, or a program ignores them) and deleted it at its close. SQLite goes on
 * committing into the deleted file, which no other process sees (session 30: answered writes
 * missing from every other connection and every restore). One fstat.
 */
export function walDeleted(db: Database): boolean {
  if (deadWals.has(db)) return true;
  const known = wals.get(db);
  if (known === undefined || fs.fstatSync(known.fd).nlink !== 0) return false;
  deadWals.add(db);
  return true;
}

/**
 * The failure a capture of a connection whose WAL was deleted under it ends with, once it copied
 * its frames: folding them into the file (a checkpoint, a generation's snapshot, the close) would
 * write pages of a dead WAL under other connections' newer ones, so none of those runs; the
 * failure is logged at every commit and the handle is held open (see `HandleCache`).
 */
export function walDeletedError(dbPath: string): Error {
  return new Error(
    `the WAL of ${dbPath} was deleted while this connection had it open (another connection took itself for its last): what it commits is seen by no other process, only by history; it is neither checkpointed nor closed`,
  );
}

export function closeWal(db: Database): void {
  closeAnswered(db);
  // Its -shm and database file descriptors stay while a connection that read through them is
  // open (kept-descriptors.ts). The -wal's goes now: SQLite takes no lock on the -wal.
  sweepKeptDescriptors();
  const known = wals.get(db);
  if (!known) return;
  wals.delete(db);
  fs.closeSync(known.fd);
}

interface CaptureStatements {
  begin: Statement;
  rollback: Statement;
  dataVersion: Statement;
  /** `PRAGMA data_version` at this connection's last capture. */
  seen?: number;
  /** This connection's last capture copied every frame it found (it did not fail half-way). */
  clean?: boolean;
  /** Where history ended after that capture (`positionKey`). */
  capturedTo?: string;
  /** The WAL index's count of commits after that capture (`readWalIndex`). */
  change?: number;
}
const lockStatements = new WeakMap<Database, CaptureStatements>();

/**
 * Takes the write lock for a capture: 'began' when this call began a transaction, 'held' when
 * the connection already had one open (a restore's own), undefined when `wait` is false and
 * another connection has the lock.
 */
export function beginCapture(db: Database, wait: boolean): 'began' | 'held' | undefined {
  if (db.inTransaction) return 'held';
  let stmts = lockStatements.get(db);
  if (!stmts) {
    stmts = { begin: db.prepare('BEGIN IMMEDIATE'), rollback: db.prepare('ROLLBACK'), dataVersion: db.prepare('PRAGMA data_version').pluck() };
    lockStatements.set(db, stmts);
  }
  if (wait) {
    stmts.begin.run();
    return 'began';
  }
  const timeout = db.pragma('busy_timeout', { simple: true }) as number;
  db.pragma('busy_timeout = 0');
  try {
    stmts.begin.run();
    return 'began';
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_BUSY') return undefined;
    throw err;
  } finally {
    db.pragma(`busy_timeout = ${timeout}`);
  }
}

/**
 * Whether no other connection committed since this connection's last capture (`PRAGMA
 * data_version` moves only for other connections' commits). With this connection's last capture
 * finished (it copied every frame it found), every frame past the segment is then this
 * connection's, in the WAL the segment copies, or none follows on from it: a commit's capture
 * may read them without the WAL's header. Called under the write lock.
 */
export function othersQuiet(db: Database): boolean {
  const stmts = lockStatements.get(db);
  if (!stmts) return false;
  const version = stmts.dataVersion.get() as number;
  const quiet = stmts.seen === version;
  stmts.seen = version;
  return quiet;
}

/**
 * How this connection's last capture ended: whether it finished (copied every frame it found)
 * and where history ended then (`positionKey`). The capture beginning now is unfinished until it
 * is (`finished`): one that fails, even to take the lock, leaves the next to read the WAL's header.
 */
export function lastCapture(db: Database): { finished: boolean; capturedTo?: string } {
  const stmts = lockStatements.get(db);
  if (!stmts) return { finished: false };
  const last = { finished: stmts.clean === true, capturedTo: stmts.capturedTo };
  stmts.clean = false;
  return last;
}

/** A capture finished: it copied every frame it found, up to `state`, and the WAL index counted `change` commits. */
export function finished(db: Database, state: State | undefined, change: number | undefined): void {
  const stmts = lockStatements.get(db);
  if (!stmts) return;
  stmts.clean = true;
  stmts.capturedTo = state ? positionKey(state) : undefined;
  stmts.change = change;
}

/**
 * Whether a commit was made since this connection's last capture finished, by any connection:
 * the WAL index's count moved (a checkpoint does not move it). Undefined when it cannot tell.
 */
export function committedSince(db: Database, dbPath: string): boolean | undefined {
  const n = commitsSinceCapture(db, dbPath);
  return n === undefined ? undefined : n !== 0;
}

/**
 * How many commits any connection made since this connection's last capture finished, by the
 * WAL index's count (unsigned: it wraps). Undefined when it cannot tell.
 */
export function commitsSinceCapture(db: Database, dbPath: string): number | undefined {
  const before = lockStatements.get(db)?.change;
  const now = readWalIndex(db, dbPath)?.change;
  return before === undefined || now === undefined ? undefined : (now - before) >>> 0;
}

export function endCapture(db: Database, lock: 'began' | 'held'): void {
  if (lock === 'began' && db.inTransaction) lockStatements.get(db)!.rollback.run();
}
