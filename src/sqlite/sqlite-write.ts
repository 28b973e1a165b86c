import type { Database, Statement } from 'better-sqlite3';
import { isWord } from '../guard/classifier.ts';
import { guardWrite, parseStatement, type StatementKind } from '../guard/guard.ts';
import { AgentDbError } from '../errors.ts';
import type { PlanLimits } from '../policy/plan-limits.ts';
import { effectDigest, ensureCallsTable, recordResult, recordedResult, type RecordedCall } from './call-record.ts';
import { agentTableCount, longNameRefusal, objectCountRefusal, schemaChangeRefusal, schemaState, schemaStateAt, schemaVersion } from './sqlite-schema.ts';
import { inWriteTransaction, trusted } from './sqlite-trusted.ts';
import { agentBindings, encodeValue, readRows, type EncodedValue, type Param } from './sqlite-values.ts';
import { checkedStatement, forgetStatements } from './statement-cache.ts';
import { EffectChanged, EffectRecorder, NO_ROWS_EFFECT } from './sqlite-effect.ts';
import { CreatedRows } from './created-rows.ts';
import type { EffectLimits } from '../contracts/effect.ts';
import { recordCallActivity, type ActivityNote } from './sqlite-activity.ts';

/** Rows a write returns through RETURNING, at most. */
export const MAX_RETURNING_ROWS = 1000;

/** Result size a write's RETURNING rows may take when the caller names none. */
export const DEFAULT_MAX_RESULT_BYTES = 1024 * 1024;

/** What DATA_WRITE_SQL answers. */
export interface WriteResult {
  /** Rows inserted, updated or deleted (0 for DDL). */
  changes: number;
  /**
   * The rowid of the last row this statement inserted (a decimal string past 2^53), or null
   * when it inserted none: DDL, UPDATE, DELETE, an INSERT OR IGNORE that ignored every row, an
   * upsert that only updated.
   */
  lastInsertRowid: EncodedValue;
  /** RETURNING columns; empty without RETURNING. */
  columns: string[];
  /** RETURNING rows, encoded like query rows, at most {@link MAX_RETURNING_ROWS}. */
  rows: EncodedValue[][];
  /** More RETURNING rows existed than were returned (the write itself was complete). */
  truncated: boolean;
  oversize?: true;
  /** A replay whose record kept only some RETURNING rows says so here (see `MAX_RECORD_BYTES`). */
  note?: string;
}

/** A result, and whether it is the one recorded by an earlier run of the same call. */
export type Replayable<T> = T & { replayed?: true };

/**
 * Runs one agent write exactly once per call key (`callKey`: workspace, agent, call id).
 *
 * In one `BEGIN IMMEDIATE` transaction: a call id already recorded returns its recorded result
 * (`replayed: true`) and runs nothing; otherwise the statement passes both guard layers, runs,
 * and is checked against the plan (table count) and against what it did to the schema (nothing
 * removed; no trigger, virtual table or temporary object). The result is recorded with the call
 * id and committed with the effect. The size limit is SQLite's `max_page_count`, so a write past
 * it fails with SQLITE_FULL. `admit` refuses a new write (not a replay) by throwing. Any failure
 * rolls the whole transaction back.
 *
 * With `bound` (the effect a person approved), the effect is recorded in the same transaction
 * (`EffectRecorder`) and the write commits only while its digest is the approved one: otherwise
 * nothing commits and {@link EffectChanged} carries the effect it would have had. With
 * `activity`, the commit's row of what it was for goes in the same transaction (`sqlite-activity.ts`).
 * @throws AgentDbError for refusals and limits; SQLite's own errors propagate for `toOpError`.
 */
export function write(
  db: Database,
  sql: string,
  params: readonly Param[],
  callKey: string,
  limits: PlanLimits,
  maxResultBytes = DEFAULT_MAX_RESULT_BYTES,
  admit?: () => void,
  bound?: { digest: string; limits: EffectLimits },
  activity?: ActivityNote,
): Replayable<WriteResult> {
  const bindings = agentBindings(sql, params);
  // DDL runs with run(): an ALTER … ADD COLUMN with a CHECK reports itself a reader (SQLite
  // checks existing rows with a query of its own), and its "rows" are no RETURNING.
  const { ddl, kind, upsert } = writeShape(sql);
  // A handle's first write sets the limit before the calls table's upkeep writes; every later
  // one runs under the limit its previous write set (the connection keeps it).
  if (!pageSizes.has(db)) applySizeLimit(db, limits.maxBytes);
  ensureCallsTable(db);
  const call: RecordedCall = { key: callKey, digest: effectDigest(['write', sql, params]) };
  let schemaMoved = false;
  let recorder: EffectRecorder | undefined;
  try {
    return inWriteTransaction(db, () => {
      // Set again in the write's own transaction, before anything of it runs: outside one, the
      // PRAGMA began and ended a read transaction of its own, two more locks per write (issue 31).
      applySizeLimit(db, limits.maxBytes);
      const recorded = recordedResult(db, call) as RecordedWrite | undefined;
      if (recorded !== undefined) return { value: { ...replayedWrite(recorded), replayed: true as const }, commit: false };
      // Refusals that depend on the database's state (its history quota) come after the replay:
      // a write already committed answers what it did, whatever it costs to write again.
      admit?.();

      const stmt = checkedStatement(db, sql, 'write');
      // After the guard judged the statement, before the schema is read: the recorder's temporary
      // objects are there both before and after, so the schema check sees only the statement's.
      if (bound && !ddl) recorder = new EffectRecorder(db, sql);
      const created = bound && kind === 'create_table' ? new CreatedRows(db, sql) : undefined;
      const version = schemaVersion(db);
      const before = schemaStateAt(db, version);
      const result = runWrite(db, stmt, bindings, maxResultBytes, ddl, kind, sql, upsert);
      if (schemaVersion(db) !== version) {
        // DDL. Even a change the check allows (ALTER TABLE … ADD COLUMN) makes cached
        // statements stale: their column lists are read before SQLite re-prepares them.
        schemaMoved = true;
        const after = schemaState(db);
        const refusal = schemaChangeRefusal(before, after) ?? longNameRefusal(db, before, after);
        if (refusal) throw new AgentDbError('SQL_REFUSED', refusal);
        const tables = agentTableCount(db);
        if (tables > limits.maxTables) {
          throw new AgentDbError('LIMIT_EXCEEDED', `the database may hold ${limits.maxTables} tables and this would make ${tables}`);
        }
        const past = objectCountRefusal(before, after, limits);
        if (past) throw new AgentDbError('LIMIT_EXCEEDED', past);
      }
      if (bound) {
        const effect = recorder ? recorder.read(bound.limits) : created ? created.read(bound.limits) : NO_ROWS_EFFECT;
        if (effect.digest !== bound.digest) throw new EffectChanged(effect);
        recorder?.remove();
      }
      recordResult(db, call, recordedWrite(result));
      if (activity) recordCallActivity(db, activity, result.changes);
      return { value: result, commit: true };
    });
  } finally {
    recorder?.restorePragma();
    // Cached statements were judged and compiled against the old schema; prepare them again.
    if (schemaMoved) forgetStatements(db);
  }
}

/**
 * A write's result as its exactly-once record keeps it: without RETURNING (most writes), only
 * `changes` and `lastInsertRowid`. The empty `columns` and `rows` and `truncated: false` were a
 * fifth of each record, in the calls table's b-tree, whose leaves fill and split as records come:
 * 5.95 WAL frames a small insert's commit against 5.77 without them (issue 31), each frame written,
 * copied into history and checkpointed. Records written before keep them, and replay as they are.
 */
type RecordedWrite = Partial<Pick<WriteResult, 'columns' | 'rows' | 'truncated'>> & Omit<WriteResult, 'columns' | 'rows' | 'truncated'>;

function recordedWrite(result: WriteResult): RecordedWrite {
  if (result.rows.length > 0 || result.columns.length > 0 || result.truncated || result.oversize || result.note !== undefined) return result;
  const { columns: _c, rows: _r, truncated: _t, ...kept } = result;
  return kept;
}

/**
 * A recorded write as it was answered: what {@link recordedWrite} left out put back, in its place.
 * For a replay, and for the `recorded` op that answers a write whose child died after its commit.
 */
export function replayedWrite(recorded: unknown): WriteResult {
  if (Array.isArray((recorded as RecordedWrite).rows)) return recorded as WriteResult;
  const { changes, lastInsertRowid, ...rest } = recorded as RecordedWrite;
  return { changes, lastInsertRowid, columns: [], rows: [], truncated: false, ...rest };
}

/** What {@link write} reads of a statement's guard verdict. */
interface WriteShape {
  ddl: boolean;
  kind: StatementKind | undefined;
  /**
   * An INSERT or REPLACE with `ON CONFLICT … DO UPDATE`: only its answer needs the rowid held
   * before it ran. Undefined for a text too long to keep: then looked for only where it matters.
   */
  upsert: boolean | undefined;
}

/**
 * Verdicts' shapes by SQL text: the verdict is the text's alone, and agents send the same few
 * statements with new params, so tokenizing each write again was a sixth of a small insert's
 * time in the child (issue 31). Bounded in count and in the length of a text kept; cleared when full.
 */
const shapes = new Map<string, WriteShape>();
const MAX_SHAPES = 512;
const MAX_SHAPE_SQL = 2048;

function writeShape(sql: string): WriteShape {
  let shape = shapes.get(sql);
  if (shape) return shape;
  // The refusal itself is the statement cache's to give (`checkedStatement` runs the guard again).
  const verdict = guardWrite(sql);
  const kind = verdict.ok ? verdict.kind : undefined;
  // Tokenized again for an insert: once per text kept, never per write of one that is not.
  const kept = sql.length <= MAX_SHAPE_SQL;
  const upsert = kind !== 'insert' && kind !== 'replace' ? false : kept ? isUpsert(sql) : undefined;
  shape = { ddl: verdict.ok && verdict.ddl, kind, upsert };
  if (kept) {
    if (shapes.size >= MAX_SHAPES) shapes.clear();
    shapes.set(sql, shape);
  }
  return shape;
}

/** Runs a checked write statement; its changes (RETURNING rows cut) as DATA_WRITE_SQL answers them. */
export function runWrite(
  db: Database,
  stmt: Statement,
  bindings: unknown[],
  maxResultBytes: number,
  ddl: boolean,
  kind: StatementKind | undefined,
  sql: string,
  upsert?: boolean,
): WriteResult {
  stmt.safeIntegers(true);
  // last_insert_rowid() belongs to the connection and outlives statements (an agent's next
  // statement may read it), so after a CREATE TABLE it still holds an earlier insert's id. Only
  // an upsert's answer compares with it (see `insertedRowid`): read for it alone, a statement
  // step less per insert (issue 31).
  const before = upsert === false ? undefined : lastRowid(db);
  if (!stmt.reader || ddl) {
    const info = stmt.run(...bindings);
    const changes = Number(info.changes);
    const inserted = insertedRowid(kind, changes, before, info.lastInsertRowid as bigint, sql, upsert);
    return { changes, lastInsertRowid: inserted, columns: [], rows: [], truncated: false };
  }
  // RETURNING: SQLite makes every change on the first step, so stopping after the rows we keep
  // still leaves a complete write.
  const read = readRows(stmt, bindings, MAX_RETURNING_ROWS, maxResultBytes);
  const info = trusted(db, 'SELECT changes(), last_insert_rowid()').raw(true).safeIntegers(true).get() as [bigint, bigint];
  const changes = Number(info[0]);
  return { changes, lastInsertRowid: insertedRowid(kind, changes, before, info[1], sql, upsert), ...read };
}

function lastRowid(db: Database): bigint {
  return trusted(db, 'SELECT last_insert_rowid()').pluck().safeIntegers(true).get() as bigint;
}

/**
 * The id of the row the statement inserted, or null when it inserted none. Only an INSERT or
 * REPLACE inserts (no triggers run); it did when it changed rows, unless it is an upsert, whose
 * changes may all be updates: then only a moved last_insert_rowid() shows an insert (`before`,
 * read unless `upsert` is false). (An upsert whose insert got the very rowid the connection held
 * before reads as none: a rare miss, where reporting the old id would be a wrong answer.)
 */
function insertedRowid(
  kind: StatementKind | undefined,
  changes: number,
  before: bigint | undefined,
  after: bigint,
  sql: string,
  upsert: boolean | undefined,
): EncodedValue {
  if ((kind !== 'insert' && kind !== 'replace') || changes === 0) return null;
  if (before === undefined || after !== before || !(upsert ?? isUpsert(sql))) return encodeValue(after);
  return null;
}

/** `… ON CONFLICT … DO UPDATE …`, read off the tokens so strings and comments do not count. */
function isUpsert(sql: string): boolean {
  const parsed = parseStatement(sql);
  if ('ok' in parsed) return false;
  return parsed.tokens.some((t, i) => isWord(t, 'do') && isWord(parsed.tokens[i + 1], 'update'));
}

// Page size is fixed once a database has content; read it once per handle.
const pageSizes = new WeakMap<Database, number>();

/**
 * Caps the file at `maxBytes` through `max_page_count`, set on every write: it is not stored in
 * the file, and the connection's own maximum is not to be trusted from one write to the next.
 * SQLite never lowers it below the current size, so a database already over a smaller plan's
 * limit stays readable and only refuses to grow; and it raises a connection's maximum by itself
 * to the file's size whenever it sees the file larger (another program grew it past the limit).
 * A handle that kept the limit it had set as asked (issue 31) therefore grew the file past its
 * plan's limit once the other program had shrunk it again (review R1: a 64 KB database took a
 * 100 KB row); the statement costs ~2 us of CPU per write inside its transaction (load 2-4).
 */
export function applySizeLimit(db: Database, maxBytes: number): void {
  let pageSize = pageSizes.get(db);
  if (pageSize === undefined) {
    pageSize = trusted(db, 'PRAGMA page_size').pluck().get() as number;
    pageSizes.set(db, pageSize);
  }
  const pages = Math.max(1, Math.floor(maxBytes / pageSize));
  trusted(db, `PRAGMA max_page_count = ${pages}`).run();
}
