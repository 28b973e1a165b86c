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
export function toOpError(err: unknown): OpError {
  if (err instanceof AgentDbError) return { code: err.code, detail: err.detail ?? '' };
  const message = err instanceof Error ? err.message : String(err);
  const sqliteCode = (err as { code?: unknown } | null)?.code;
  if (typeof sqliteCode === 'string' && sqliteCode.startsWith('SQLITE_')) {
    return { code: codeForSqlite(sqliteCode), detail: message };
  }
  // better-sqlite3 reports binding mistakes (a missing or extra parameter) as plain RangeError
  // and TypeError before SQLite runs; they are the caller's SQL, not our fault.
  if (err instanceof RangeError && /Invalid string length|Array buffer allocation failed/.test(message)) {
    return { code: 'RESOURCE_LIMIT', detail: message };
  }
  if (err instanceof RangeError || err instanceof TypeError) return { code: 'SQL_ERROR', detail: message };
  return { code: 'INTERNAL', detail: message };
}

function codeForSqlite(code: string): ErrorCode {
  // Extended codes share the primary code's prefix (SQLITE_CORRUPT_INDEX, SQLITE_IOERR_NOMEM…).
  const primary = code.replace(/^(SQLITE_[A-Z]+)(_.*)?$/, '$1');
  switch (primary) {
    case 'SQLITE_FULL':
      // max_page_count is how the plan's size limit is enforced; a full disk reads the same.
      return 'LIMIT_EXCEEDED';
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
