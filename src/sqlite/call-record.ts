import type { Database } from 'better-sqlite3';
import { digestOf } from '../contracts/call-identity.ts';
import { AgentDbError } from '../errors.ts';
import { trusted } from './sqlite-trusted.ts';
import type { Param } from './sqlite-values.ts';

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

/**
 * What the `recorded` op answers: the call's result when its transaction committed. Absent, it
 * did not: the record is written in the same transaction as the effect.
 */
export interface RecordedOutcome {
  committed: boolean;
  result?: unknown;
}

const ready = new WeakSet<Database>();

// WITHOUT ROWID: recording a call must not move last_insert_rowid(), which an agent's next
// statement may read (INSERT INTO child VALUES (last_insert_rowid(), …)).
/**
 * Creates the calls table if needed, with agentdb's own (trusted) SQL, and prunes records past
 * their retention; once per open handle, before its first write or drop.
 */
export function ensureCallsTable(db: Database, now = Date.now()): void {
  if (ready.has(db)) return;
  db.exec(`CREATE TABLE IF NOT EXISTS ${CALLS_TABLE} (call_id TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL, digest TEXT) WITHOUT ROWID`);
  // Files written before calls carried a digest gain the column; their old records keep none.
  const columns = trusted(db, `SELECT name FROM pragma_table_info('${CALLS_TABLE}')`).pluck().all() as string[];
  if (!columns.includes('digest')) db.exec(`ALTER TABLE ${CALLS_TABLE} ADD COLUMN digest TEXT`);
  trusted(db, `DELETE FROM ${CALLS_TABLE} WHERE at < ?`).run(now - CALL_RECORD_RETENTION_MS);
  ready.add(db);
}

/**
 * One call as its exactly-once record knows it: its key (workspace, agent and call id, see
 * `callKey`: a shared database serves every agent of its workspace, whose call ids repeat) and
 * the digest of what it runs.
 */
export interface RecordedCall {
  key: string;
  digest: string;
}

/** What a write or drop runs, as its record's digest covers it: the same key with other SQL is another call. */
export type RecordedEffect = ['write', string, readonly Param[]] | ['drop', string];

/** The digest a write or drop is recorded under. */
export function effectDigest(effect: RecordedEffect): string {
  return digestOf(effect);
}

/**
 * Whether `call` committed, read from its record by any connection after the one that ran it
 * died before answering (the record commits with the effect, or not at all). A database never
 * written, or written before any call, has no record.
 * @throws AgentDbError IDEMPOTENCY_CONFLICT when the key ran something else.
 */
export function committedCall(db: Database, call: RecordedCall): RecordedOutcome {
  const table = trusted(db, `SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '${CALLS_TABLE}'`).get();
  if (table === undefined) return { committed: false };
  const result = recordedResult(db, call);
  return result === undefined ? { committed: false } : { committed: true, result };
}

/**
 * The result recorded for `call`, or undefined when the call has not run here.
 * @throws AgentDbError IDEMPOTENCY_CONFLICT when the key ran something else.
 */
export function recordedResult(db: Database, call: RecordedCall): unknown {
  const row = trusted(db, `SELECT result, digest FROM ${CALLS_TABLE} WHERE call_id = ?`).get(call.key) as { result: string; digest: string | null } | undefined;
  if (row === undefined) return undefined;
  if (row.digest !== null && row.digest !== call.digest) {
    // The key's last part is the caller's own call id (see `callKey`).
    const callId = call.key.slice(call.key.lastIndexOf('.') + 1);
    throw new AgentDbError('IDEMPOTENCY_CONFLICT', `call ${JSON.stringify(callId)} already ran another statement in this database.`);
  }
  return JSON.parse(row.result);
}

/** Records `result` for `call`; must run inside the transaction of the effect it records. */
export function recordResult(db: Database, call: RecordedCall, result: unknown, now = Date.now()): void {
  trusted(db, `INSERT INTO ${CALLS_TABLE} (call_id, result, at, digest) VALUES (?, ?, ?, ?)`).run(call.key, JSON.stringify(result), now, call.digest);
}
