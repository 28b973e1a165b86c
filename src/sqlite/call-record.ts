import type { Database } from 'better-sqlite3';
import { digestOf, unboundCallIsMine, unboundKeyOf } from '../contracts/call-identity.ts';
import { AgentDbError } from '../errors.ts';
import { trusted } from './sqlite-trusted.ts';
import type { Param } from './sqlite-values.ts';
import { jsonBytes } from './result-budget.ts';
import { ensureActivityTable, pruneActivity, recordOwnActivity } from './sqlite-activity.ts';

/**
 * The internal table that makes writes exactly-once: a write records its call id and result in
 * the same transaction as its effect, so a job retried after a crash finds the id and returns
 * the recorded result instead of writing again (DESIGN.md "Exactly-once effect").
 */
export const CALLS_TABLE = '_agentdb_calls';

/**
 * How long a call's record is kept. Retries come within minutes (a lapsed BullMQ lock); a week
 * outlasts how long a call id stays taken (a day, the approval wait and RESULT_TTL_HOURS), and
 * keeps the table from growing into the size limit.
 */
export const CALL_RECORD_RETENTION_MS = 7 * 24 * 3600 * 1000;

/**
 * The most a record keeps of a write's result, as JSON. A replay needs `changes` and
 * `lastInsertRowid`; RETURNING rows are kept while they fit. Records live a week inside the
 * database file, under its plan's size limit, where nobody sees or deletes them: whole results
 * (up to MAX_RESULT_BYTES each) let 116 writes `INSERT … RETURNING printf('%.*c', 900000, 'x')`
 * fill a shared 100 MB database for every other writer (review 16b).
 */
export const MAX_RECORD_BYTES = 16 * 1024;

/**
 * How often, at most, a handle deletes activity rows past their retention, on a write. Not only
 * when it opens: a worker keeps a busy database's handle open for days.
 */
export const PRUNE_EVERY_MS = 60 * 1000;

/**
 * How often, at most, a process deletes a database's records past their retention, on a write.
 * The table has no index on `at` (a small insert's commit wrote 5.73 WAL frames with one, 4.41
 * without, and spent 19 % more CPU; issue 31), so a prune reads every record: a table at
 * retention holds a week of the database's writes, and read once a minute that was ~1.3 ms per
 * insert at any write rate; once a day it is under 1 us. Records live a week to eight days.
 */
export const CALL_PRUNE_EVERY_MS = 24 * 3600 * 1000;

/**
 * What the `recorded` op answers: the call's result when its transaction committed. Absent, it
 * did not: the record is written in the same transaction as the effect.
 */
export interface RecordedOutcome {
  committed: boolean;
  result?: unknown;
}

/** When each handle last pruned activity rows (absent: the calls table is not checked yet on this handle). */
const pruned = new WeakMap<Database, number>();

/**
 * When this process last pruned each database's records, by file: a handle reopened (the handle
 * cache closes the least recently used) would otherwise read the whole table again at its first
 * write. Bounded; cleared when full, which costs one more prune of each database.
 */
const callsPruned = new Map<string, number>();
const MAX_CALLS_PRUNED = 4096;

// WITHOUT ROWID: recording a call must not move last_insert_rowid(), which an agent's next
// statement may read (INSERT INTO child VALUES (last_insert_rowid(), …)).
/**
 * Creates the calls table if needed, with agentdb's own (trusted) SQL, once per open handle, and
 * deletes activity rows past their retention at most every {@link PRUNE_EVERY_MS}, records at most
 * every {@link CALL_PRUNE_EVERY_MS}; before each write or drop. The delete commits on its own, before the write: a database full to its plan's limit
 * gets that room back even when the write then fails.
 */
export function ensureCallsTable(db: Database, now = Date.now()): void {
  const last = pruned.get(db);
  if (last !== undefined && now - last < PRUNE_EVERY_MS) return;
  if (last === undefined) {
    // One commit for the tables (and the old index dropped): history counts a database's commits,
    // and the agent's first write is then two (this, and its own).
    // IMMEDIATE: the transaction reads before it writes, and SQLite does not wait (busy_timeout)
    // to turn a read into a write while another connection writes; it fails at once instead.
    db.transaction(() => {
      const version = trusted(db, 'PRAGMA schema_version').pluck().get();
      db.exec(`CREATE TABLE IF NOT EXISTS ${CALLS_TABLE} (call_id TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL, digest TEXT) WITHOUT ROWID`);
      // Files written before calls carried a digest gain the column; their old records keep none.
      const columns = trusted(db, `SELECT name FROM pragma_table_info('${CALLS_TABLE}')`).pluck().all() as string[];
      if (!columns.includes('digest')) db.exec(`ALTER TABLE ${CALLS_TABLE} ADD COLUMN digest TEXT`);
      // Files written before carry an index on `at`, which every record paid for on its commit.
      db.exec(`DROP INDEX IF EXISTS ${CALLS_TABLE}_at`);
      ensureActivityTable(db);
      // The commit is agentdb's own: its row keeps it from being listed as an outside write.
      if (trusted(db, 'PRAGMA schema_version').pluck().get() !== version) recordOwnActivity(db, 'upkeep');
    }).immediate();
  }
  pruned.set(db, now);
  const calls = callsDue(db, now);
  try {
    db.transaction(() => {
      const gone = (calls ? pruneCalls(db, now) : 0) + pruneActivity(db, now);
      // A prune that deleted rows is a commit: agentdb's own, which its row says (see sqlite-activity.ts).
      if (gone > 0) recordOwnActivity(db, 'upkeep', undefined, now);
    })();
    if (calls) {
      if (callsPruned.size >= MAX_CALLS_PRUNED) callsPruned.clear();
      callsPruned.set(db.name, now);
    }
  } catch {
    // Housekeeping: a prune that fails (a busy or full file) is tried again a minute on, and the
    // write goes on to meet the cause itself, if it is still there.
  }
}

/** Whether this process has not pruned the database's records in the last {@link CALL_PRUNE_EVERY_MS}. */
function callsDue(db: Database, now: number): boolean {
  const last = callsPruned.get(db.name);
  return last === undefined || now - last >= CALL_PRUNE_EVERY_MS || now < last;
}

/** Deletes the records past their retention (reading every one: see {@link CALL_PRUNE_EVERY_MS}); answers how many. */
function pruneCalls(db: Database, now: number): number {
  return trusted(db, `DELETE FROM ${CALLS_TABLE} WHERE at < ?`).run(now - CALL_RECORD_RETENTION_MS).changes;
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
  const row = recordOf(db, call.key) ?? unboundRecordOf(db, call.key);
  if (row === undefined) return undefined;
  if (row.digest !== null && row.digest !== call.digest) {
    // The key's last part is the caller's own call id (see `callKey`).
    const callId = call.key.slice(call.key.lastIndexOf('.') + 1);
    throw new AgentDbError('IDEMPOTENCY_CONFLICT', `call ${JSON.stringify(callId)} already ran another statement in this database.`);
  }
  return replayedResult(JSON.parse(row.result));
}

interface RecordRow {
  result: string;
  digest: string | null;
  at: number;
}

function recordOf(db: Database, key: string): RecordRow | undefined {
  return trusted(db, `SELECT result, digest, at FROM ${CALLS_TABLE} WHERE call_id = ?`).get(key) as RecordRow | undefined;
}

/**
 * A member's or agent key's call recorded under the bare name (before calls were bound to the
 * member record or agent registration, or an agent's runtime's without a key, see `unboundKeyOf`):
 * the caller's own only if committed since its record was created (`unboundCallIsMine`), so a
 * resend across the upgrade replays it, and a later member or registration of the name neither
 * replays it nor is refused by it. Read only when the bound key has no record: a bound caller's
 * first write pays one more lookup on the primary key; a runtime's, nothing.
 */
function unboundRecordOf(db: Database, key: string): RecordRow | undefined {
  const unbound = unboundKeyOf(key);
  if (!unbound) return undefined;
  const row = recordOf(db, unbound.key);
  return row && unboundCallIsMine(row.at, unbound.since) ? row : undefined;
}

/** Records `result` for `call`; must run inside the transaction of the effect it records. */
export function recordResult(db: Database, call: RecordedCall, result: unknown, now = Date.now()): void {
  trusted(db, `INSERT INTO ${CALLS_TABLE} (call_id, result, at, digest) VALUES (?, ?, ?, ?)`).run(
    call.key,
    JSON.stringify(recordable(result)),
    now,
    call.digest,
  );
}

/** A write's result as its record keeps it: `rowsCut`, the rows it answered, when not all are kept. */
interface CutResult {
  columns: unknown[];
  rows: unknown[];
  truncated: boolean;
  rowsCut?: number;
}

const hasRows = (result: unknown): result is CutResult =>
  typeof result === 'object' && result !== null && Array.isArray((result as CutResult).rows) && Array.isArray((result as CutResult).columns);

/**
 * `result` cut to {@link MAX_RECORD_BYTES}: the RETURNING rows that fit, in order, and how many
 * there were (the columns too, should their names alone not fit). Everything else is kept.
 */
export function recordable(result: unknown): unknown {
  if (!hasRows(result) || jsonBytes(result) <= MAX_RECORD_BYTES) return result;
  const cut: CutResult = { ...result, rows: [], truncated: true, rowsCut: result.rows.length };
  if (jsonBytes(cut) > MAX_RECORD_BYTES) cut.columns = [];
  let bytes = jsonBytes(cut);
  for (const row of result.rows) {
    const size = jsonBytes(row) + 1;
    if (bytes + size > MAX_RECORD_BYTES) break;
    cut.rows.push(row);
    bytes += size;
  }
  return cut;
}

/** A recorded result as a replay answers it: a cut one says so in `truncated` and a `note`. */
function replayedResult(recorded: unknown): unknown {
  if (!hasRows(recorded) || recorded.rowsCut === undefined) return recorded;
  const { rowsCut, ...rest } = recorded;
  const note = `answered from this call's exactly-once record, which keeps ${MAX_RECORD_BYTES / 1024} KB of RETURNING rows: ${rest.rows.length} of the ${rowsCut} rows the write returned when it ran`;
  return { ...rest, truncated: true, note };
}
