import type { Database, Statement } from 'better-sqlite3';
import { AgentDbError } from '../errors.ts';
import { fullCause } from './sqlite-errors.ts';

// agentdb's own SQL, prepared once per handle. Keyed by the Database object so a closed
// handle's statements go with it.
const prepared = new WeakMap<Database, Map<string, Statement>>();

/**
 * A statement of agentdb's own (never agent SQL: that goes through the guard, see
 * `statement-cache.ts`), prepared once per handle because it runs on every call.
 */
export function trusted(db: Database, sql: string): Statement {
  let byText = prepared.get(db);
  if (!byText) prepared.set(db, (byText = new Map()));
  let stmt = byText.get(sql);
  if (!stmt) byText.set(sql, (stmt = db.prepare(sql)));
  return stmt;
}

/**
 * Runs `fn` in a read transaction that is always rolled back, even when it succeeds: a read
 * that somehow wrote leaves nothing behind, and every read sees one snapshot.
 */
export function inRolledBackRead<T>(db: Database, fn: () => T): T {
  trusted(db, 'BEGIN').run();
  try {
    return fn();
  } finally {
    if (db.inTransaction) trusted(db, 'ROLLBACK').run();
  }
}

/**
 * Runs `fn` in a `BEGIN IMMEDIATE` transaction (the write lock is taken up front, so the
 * exactly-once lookup and the write see the same state). It commits when `fn` says so and rolls
 * back on anything thrown, including a failed COMMIT, so a failure leaves no trace. A SQLITE_FULL
 * the disk caused is STORAGE_FULL, decided where it happened (see {@link diskFull}).
 */
export function inWriteTransaction<T>(db: Database, fn: () => { value: T; commit: boolean }): T {
  trusted(db, 'BEGIN IMMEDIATE').run();
  try {
    const { value, commit } = fn();
    if (!commit) {
      trusted(db, 'ROLLBACK').run();
      return value;
    }
    try {
      trusted(db, 'COMMIT').run();
    } catch (err) {
      // The disk's, whatever it holds by the time the answer is made: a COMMIT only writes pages
      // the statement already allocated under max_page_count. Told apart later by free space, a
      // disk freed in between blamed the plan's size limit (LIMIT_EXCEEDED, not retryable) for a
      // database of a few hundred rows (review F2).
      if ((err as { code?: unknown }).code === 'SQLITE_FULL') throw new AgentDbError('STORAGE_FULL', (err as Error).message);
      throw err;
    }
    return value;
  } catch (err) {
    const full = diskFull(db, err);
    // After some errors (SQLITE_FULL, SQLITE_NOMEM) SQLite may already have rolled back.
    if (db.inTransaction) trusted(db, 'ROLLBACK').run();
    throw full ?? err;
  }
}

/**
 * STORAGE_FULL for a statement's SQLITE_FULL that the disk caused, told apart from the plan's
 * size limit (`max_page_count`, which SQLite reports alike) by the disk's free space the moment
 * it failed. A statement larger than the page cache spills pages to the WAL before its COMMIT,
 * and on a full disk that spill fails inside the statement; told apart later, when the executor
 * answered, a disk freed in between (a large file deleted, an ftruncate freeing its pages as it
 * goes) had more room than the plan still allowed the database, and the write was answered
 * LIMIT_EXCEEDED, "drop data", for a fault that had passed (session 30, F6; F2's leftover).
 * Undefined for anything else: a SQLITE_FULL at the plan's limit goes on to the executor's
 * answer as SQLite's own error.
 */
function diskFull(db: Database, err: unknown): AgentDbError | undefined {
  if ((err as { code?: unknown }).code !== 'SQLITE_FULL') return undefined;
  return fullCause(db, db.name) === 'STORAGE_FULL' ? new AgentDbError('STORAGE_FULL', (err as Error).message) : undefined;
}

/** Quotes an identifier for agentdb's own SQL: double quotes, inner quotes doubled. */
export function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
