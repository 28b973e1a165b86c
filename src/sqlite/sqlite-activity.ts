import type { Database } from 'better-sqlite3';
import { trusted } from './sqlite-trusted.ts';

/**
 * What each commit agentdb makes was for, kept inside the database file in the commit's own
 * transaction: the call that wrote (who, which tool, its SQL cut, its rationale, who approved
 * it, rows changed), a restore, or agentdb's own upkeep (the calls table's housekeeping, an
 * audit row). History's commits are matched with these rows to list a database's history as
 * what agents did (`history/activity-view.ts`); a commit with none was made outside agentdb.
 * `seq` orders rows as their commits were made (commits in one millisecond share a time).
 * WITHOUT ROWID, so recording never moves `last_insert_rowid()` (see `CALLS_TABLE`).
 */
export const ACTIVITY_TABLE = '_agentdb_activity';

/** SQL kept per call, in UTF-8 bytes; the row keeps the whole statement's length beside it. */
export const MAX_ACTIVITY_SQL_BYTES = 2048;

/**
 * How long rows are kept: as long as history is by default (HISTORY_RETENTION_DAYS, 30), and a
 * few days more. A call's row is about the size of its SQL (cut at 2 KB), inside the database,
 * under its plan's size limit: kept for ever, a busy database would fill with them.
 */
export const ACTIVITY_RETENTION_MS = 35 * 24 * 3600 * 1000;

/** What a write or drop says of itself, for its row: sent by the worker with the request. */
export interface ActivityNote {
  tool: string;
  /** `agent:<name>` or `member:<name>`. */
  by: string;
  /** The caller's call id. */
  callId: string;
  /** The SQL of a write, the table of a drop; cut here to {@link MAX_ACTIVITY_SQL_BYTES}. */
  statement: string;
  rationale?: string;
  /** The member who approved the call, when it waited for one. */
  approvedBy?: string;
}

/** A row as the listing reads it. */
export interface ActivityRow {
  seq: number;
  kind: 'call' | 'restore' | 'upkeep';
  at: number;
  callId: string | null;
  tool: string | null;
  by: string | null;
  statement: string | null;
  /** The whole statement's length in bytes: more than `statement`'s when it was cut. */
  statementBytes: number | null;
  rationale: string | null;
  approvedBy: string | null;
  /** Rows the write changed; for a drop, the rows of the table dropped when known. */
  changes: number | null;
}

const COLUMNS = 'seq, kind, at, call_id, tool, by, statement, statement_bytes, rationale, approved_by, changes';

/**
 * Creates the table unless the file has it, in the caller's transaction when it is in one. Looked
 * up each time rather than remembered per handle: a transaction that created it may roll back.
 */
export function ensureActivityTable(db: Database): void {
  if (hasActivityTable(db)) return;
  db.exec(
    `CREATE TABLE IF NOT EXISTS ${ACTIVITY_TABLE} (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, at INTEGER NOT NULL, call_id TEXT, tool TEXT,
      by TEXT, statement TEXT, statement_bytes INTEGER, rationale TEXT, approved_by TEXT, changes INTEGER) WITHOUT ROWID`,
  );
}

/** Whether the file has the table (a database written before it existed, or never by a call, has not). */
export function hasActivityTable(db: Database): boolean {
  return trusted(db, `SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '${ACTIVITY_TABLE}'`).get() !== undefined;
}

/**
 * {@link nextSeq}, the table made first when it is missing: read first, and looked for only when
 * that fails, since every write records a row and the look was a scan of the schema per write
 * (issue 31). Any failure takes the way it always took, whose own failure is the one thrown.
 */
function seqEnsured(db: Database): number {
  try {
    return nextSeq(db);
  } catch {
    ensureActivityTable(db);
    return nextSeq(db);
  }
}

function nextSeq(db: Database): number {
  return trusted(db, `SELECT coalesce(max(seq), 0) + 1 FROM ${ACTIVITY_TABLE}`).pluck().get() as number;
}

/** `text` cut to `max` UTF-8 bytes, on a character. */
function cut(text: string, max: number): string {
  if (Buffer.byteLength(text) <= max) return text;
  return Buffer.from(text)
    .subarray(0, max)
    .toString('utf8')
    .replace(/\uFFFD$/, '');
}

/** Records a call's row; must run inside the transaction of the commit it explains. */
export function recordCallActivity(db: Database, note: ActivityNote, changes: number | null, at = Date.now()): void {
  // The row's number first: preparing the insert needs the table.
  const seq = seqEnsured(db);
  trusted(db, `INSERT INTO ${ACTIVITY_TABLE} (${COLUMNS}) VALUES (?, 'call', ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(
    seq,
    at,
    note.callId,
    note.tool,
    note.by,
    cut(note.statement, MAX_ACTIVITY_SQL_BYTES),
    Buffer.byteLength(note.statement),
    note.rationale === undefined ? null : cut(note.rationale, MAX_ACTIVITY_SQL_BYTES),
    note.approvedBy ?? null,
    changes,
  );
}

/** Records a commit of agentdb's own (`upkeep`) or a restore's; inside that commit's transaction. */
export function recordOwnActivity(db: Database, kind: 'restore' | 'upkeep', what?: { by: string; statement: string }, at = Date.now()): void {
  ensureActivityTable(db);
  trusted(db, `INSERT INTO ${ACTIVITY_TABLE} (seq, kind, at, tool, by, statement) VALUES (?, ?, ?, ?, ?, ?)`).run(
    nextSeq(db),
    kind,
    at,
    kind === 'restore' ? 'RESTORE' : null,
    what?.by ?? null,
    what?.statement ?? null,
  );
}

/**
 * Deletes rows past {@link ACTIVITY_RETENTION_MS}; answers how many. Rows are numbered as they
 * are recorded, so the old ones come first: the cut is the first row still kept, found in `seq`
 * order, and only the rows before it are read. A `DELETE … WHERE at < ?` read the whole table,
 * 35 days of a database's writes, on a write once a minute: 27 ms of the child's CPU at 300,000
 * rows (40 MB) against 0.6 ms (issue 31). A row recorded under a clock set back, behind a newer
 * one, goes once the rows before it have.
 */
export function pruneActivity(db: Database, now = Date.now()): number {
  if (!hasActivityTable(db)) return 0;
  const cutoff = now - ACTIVITY_RETENTION_MS;
  const kept = trusted(db, `SELECT seq FROM ${ACTIVITY_TABLE} WHERE at >= ? ORDER BY seq LIMIT 1`).pluck().get(cutoff) as number | undefined;
  if (kept === undefined) return trusted(db, `DELETE FROM ${ACTIVITY_TABLE} WHERE at < ?`).run(cutoff).changes;
  return trusted(db, `DELETE FROM ${ACTIVITY_TABLE} WHERE seq < ?`).run(kept).changes;
}

type RawRow = {
  seq: number;
  kind: ActivityRow['kind'];
  at: number;
  call_id: string | null;
  tool: string | null;
  by: string | null;
  statement: string | null;
  statement_bytes: number | null;
  rationale: string | null;
  approved_by: string | null;
  changes: number | null;
};

const rowOf = (r: RawRow): ActivityRow => ({
  seq: r.seq,
  kind: r.kind,
  at: r.at,
  callId: r.call_id,
  tool: r.tool,
  by: r.by,
  statement: r.statement,
  statementBytes: r.statement_bytes,
  rationale: r.rationale,
  approvedBy: r.approved_by,
  changes: r.changes,
});

/**
 * Every row's `seq`, `kind` and `at`, oldest first (what matching rows with commits needs), or
 * with `seqs` the whole rows of those. Empty without the table.
 */
export function readActivity(db: Database, seqs?: number[]): ActivityRow[] | Pick<ActivityRow, 'seq' | 'kind' | 'at'>[] {
  if (!hasActivityTable(db)) return [];
  if (seqs === undefined) return trusted(db, `SELECT seq, kind, at FROM ${ACTIVITY_TABLE} ORDER BY seq`).all() as Pick<ActivityRow, 'seq' | 'kind' | 'at'>[];
  const stmt = trusted(db, `SELECT ${COLUMNS} FROM ${ACTIVITY_TABLE} WHERE seq = ?`);
  return seqs.map((s) => stmt.get(s) as RawRow | undefined).flatMap((r) => (r ? [rowOf(r)] : []));
}

/**
 * The `seq`, `kind` and `at` of the rows after seq `after`, oldest first, and how many rows there
 * are up to it: a listing that read those before reads only these (fewer kept: rows were pruned).
 */
export function activitySince(db: Database, after: number, limit = -1): { rows: Pick<ActivityRow, 'seq' | 'kind' | 'at'>[]; kept: number } {
  if (!hasActivityTable(db)) return { rows: [], kept: 0 };
  return {
    rows: trusted(db, `SELECT seq, kind, at FROM ${ACTIVITY_TABLE} WHERE seq > ? ORDER BY seq LIMIT ?`).all(after, limit) as Pick<
      ActivityRow,
      'seq' | 'kind' | 'at'
    >[],
    kept: trusted(db, `SELECT count(*) FROM ${ACTIVITY_TABLE} WHERE seq <= ?`).pluck().get(after) as number,
  };
}

/** Every row, whole: what a restore in place carries into the restored file (see {@link carryActivity}). */
export function allActivity(db: Database): RawRow[] {
  if (!hasActivityTable(db)) return [];
  return trusted(db, `SELECT ${COLUMNS} FROM ${ACTIVITY_TABLE} ORDER BY seq`).all() as RawRow[];
}

/**
 * Puts back into a restored file the rows it lacks: the restored state is an earlier state of
 * the same file, so its rows are a prefix of these, and the calls the restore undid stay listed
 * as what happened (restoring data does not rewrite what agents did).
 */
export function carryActivity(db: Database, rows: ReturnType<typeof allActivity>): void {
  if (!rows.length) return;
  ensureActivityTable(db);
  const insert = trusted(db, `INSERT OR IGNORE INTO ${ACTIVITY_TABLE} (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  for (const r of rows) insert.run(r.seq, r.kind, r.at, r.call_id, r.tool, r.by, r.statement, r.statement_bytes, r.rationale, r.approved_by, r.changes);
}
