import type { Database } from 'better-sqlite3';
import { trusted } from './sqlite-trusted.ts';

/**
 * The internal table that makes writes exactly-once: a write records its call id and result in
 * the same transaction as its effect, so a job retried after a crash finds the id and returns
 * the recorded result instead of writing again (DESIGN.md "Exactly-once effect").
 */
export const CALLS_TABLE = '_agentdb_calls';

/**
 * How long a call's record is kept. Retries come within minutes (a lapsed BullMQ lock); a week
 * matches how long results are kept, and keeps the table from growing into the size limit.
 */
export const CALL_RECORD_RETENTION_MS = 7 * 24 * 3600 * 1000;

const ready = new WeakSet<Database>();

// WITHOUT ROWID: recording a call must not move last_insert_rowid(), which an agent's next
// statement may read (INSERT INTO child VALUES (last_insert_rowid(), …)).
/**
 * Creates the calls table if needed, with agentdb's own (trusted) SQL, and prunes records past
 * their retention; once per open handle, before its first write or drop.
 */
export function ensureCallsTable(db: Database, now = Date.now()): void {
  if (ready.has(db)) return;
  db.exec(`CREATE TABLE IF NOT EXISTS ${CALLS_TABLE} (call_id TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL) WITHOUT ROWID`);
  trusted(db, `DELETE FROM ${CALLS_TABLE} WHERE at < ?`).run(now - CALL_RECORD_RETENTION_MS);
  ready.add(db);
}

/** The result recorded for `callId`, or undefined when the call has not run here. */
export function recordedResult(db: Database, callId: string): unknown {
  const text = trusted(db, `SELECT result FROM ${CALLS_TABLE} WHERE call_id = ?`).pluck().get(callId) as string | undefined;
  return text === undefined ? undefined : JSON.parse(text);
}

/** Records `result` for `callId`; must run inside the transaction of the effect it records. */
export function recordResult(db: Database, callId: string, result: unknown, now = Date.now()): void {
  trusted(db, `INSERT INTO ${CALLS_TABLE} (call_id, result, at) VALUES (?, ?, ?)`).run(callId, JSON.stringify(result), now);
}
