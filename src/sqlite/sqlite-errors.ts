import fs from 'node:fs';
import path from 'node:path';
import type { Database } from 'better-sqlite3';
import { AgentDbError, type ErrorCode } from '../errors.ts';

/** A failure as it crosses the executor boundary: a registry code and what exactly happened. */
export interface OpError {
  code: ErrorCode;
  detail: string;
}

/**
 * Maps anything thrown while running SQLite to a registry code, keeping SQLite's own message as
 * the detail so the agent can correct itself. This is the one place that knows better-sqlite3's
 * error codes (extended result codes such as `SQLITE_CONSTRAINT_UNIQUE`).
 */
export function toOpError(err: unknown, full: () => ErrorCode = () => 'STORAGE_FULL', diskFull?: () => boolean): OpError {
  if (err instanceof AgentDbError) return { code: err.code, detail: err.detail ?? '' };
  const message = err instanceof Error ? err.message : String(err);
  const sqliteCode = (err as { code?: unknown } | null)?.code;
  if (typeof sqliteCode === 'string' && sqliteCode.startsWith('SQLITE_')) {
    if (sqliteCode.startsWith('SQLITE_FULL')) return { code: full(), detail: message };
    const code = codeForSqlite(sqliteCode);
    // Opening a database whose handle was closed needs room for its -shm and -wal files; on a
    // full disk SQLite says only "disk I/O error" (SQLITE_IOERR_*), which answered INTERNAL.
    if (code === 'INTERNAL' && /^SQLITE_(IOERR|CANTOPEN)/.test(sqliteCode) && diskFull?.()) {
      return { code: 'STORAGE_FULL', detail: `${message} (the disk that holds the database is full)` };
    }
    return { code, detail: message };
  }
  if (isDiskFull(err)) return { code: 'STORAGE_FULL', detail: message };
  // better-sqlite3 reports binding mistakes (a missing or extra parameter) as plain RangeError
  // and TypeError before SQLite runs; they are the caller's SQL, not our fault.
  if (err instanceof RangeError && /Invalid string length|Array buffer allocation failed/.test(message)) {
    return { code: 'RESOURCE_LIMIT', detail: message };
  }
  if (err instanceof RangeError || err instanceof TypeError) return { code: 'SQL_ERROR', detail: message };
  return { code: 'INTERNAL', detail: message };
}

/**
 * Whether a file write failed for want of room: node's own writes (a spilled result, history, a
 * backup's upload to a folder store) on a full disk or a used-up quota. STORAGE_FULL, not
 * INTERNAL: `backup now` on a full disk answered "agentdb failed on its own account … Report
 * the call id", where the remedy is to free space.
 */
export function isDiskFull(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT';
}

function codeForSqlite(code: string): ErrorCode {
  // Extended codes share the primary code's prefix (SQLITE_CORRUPT_INDEX, SQLITE_IOERR_NOMEM…).
  const primary = code.replace(/^(SQLITE_[A-Z]+)(_.*)?$/, '$1');
  switch (primary) {
    case 'SQLITE_NOTADB':
    case 'SQLITE_CORRUPT':
      return 'DATABASE_CORRUPT';
    case 'SQLITE_NOMEM':
    case 'SQLITE_TOOBIG':
      return 'RESOURCE_LIMIT';
    case 'SQLITE_INTERRUPT':
      return 'STATEMENT_TIMEOUT';
    case 'SQLITE_BUSY':
    case 'SQLITE_LOCKED':
      return 'UNAVAILABLE';
    case 'SQLITE_AUTH':
      return 'SQL_REFUSED';
    case 'SQLITE_IOERR':
      return code === 'SQLITE_IOERR_NOMEM' ? 'RESOURCE_LIMIT' : 'INTERNAL';
    case 'SQLITE_CANTOPEN':
    case 'SQLITE_READONLY':
    case 'SQLITE_PERM':
    case 'SQLITE_INTERNAL':
    case 'SQLITE_MISUSE':
    case 'SQLITE_PROTOCOL':
      return 'INTERNAL';
    default:
      // SQLITE_ERROR (no such table, syntax), SQLITE_CONSTRAINT_*, SQLITE_MISMATCH, SQLITE_RANGE…
      return 'SQL_ERROR';
  }
}

/**
 * Free bytes below which a write's SQLITE_FULL is put down to the disk whatever the plan would
 * still allow: a write that only changes pages (no growth) never meets max_page_count, and a
 * failed WAL append leaves less free than it needed, which is a few pages for most writes.
 */
const FULL_DISK_MARGIN = 1024 * 1024;

/** Whether the disk that holds `dbPath` has less than {@link FULL_DISK_MARGIN} free. */
export function diskIsFull(dbPath: string): boolean {
  try {
    const st = fs.statfsSync(path.dirname(dbPath));
    return st.bavail * st.bsize < FULL_DISK_MARGIN;
  } catch {
    return false;
  }
}

/**
 * Which fault a write's SQLITE_FULL is: the plan's size limit (`max_page_count`, LIMIT_EXCEEDED,
 * the agent's to fix) or a full disk (STORAGE_FULL, transient, the operator's). SQLite reports
 * both alike, and better-sqlite3 gives no errno: the disk is the cause when it has less room
 * than the plan would still let the database grow (`max_page_count − page_count` pages), give or
 * take {@link FULL_DISK_MARGIN}. Telling an agent to drop data for a full disk was the wrong
 * remedy for a fault that passes by itself (issue 25).
 */
export function fullCause(db: Database | undefined, dbPath: string): ErrorCode {
  let free: number;
  try {
    const st = fs.statfsSync(path.dirname(dbPath));
    free = st.bavail * st.bsize;
  } catch {
    return 'STORAGE_FULL';
  }
  if (free < FULL_DISK_MARGIN) return 'STORAGE_FULL';
  if (!db?.open) return 'LIMIT_EXCEEDED';
  try {
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    const pages = db.pragma('page_count', { simple: true }) as number;
    const max = db.pragma('max_page_count', { simple: true }) as number;
    return free < Math.max(0, max - pages) * pageSize ? 'STORAGE_FULL' : 'LIMIT_EXCEEDED';
  } catch {
    return 'STORAGE_FULL';
  }
}
