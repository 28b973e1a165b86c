import type { Database, Statement } from 'better-sqlite3';
import type { CheckMode } from '../guard/engine-check.ts';
import { AgentDbError } from '../errors.ts';
import { noteSingleRow } from './read-shape.ts';
import { schemaIdentity, SharedVerdicts } from './shared-verdicts.ts';

/** STATEMENT_CACHE_BYTES' default: what a child's cached statements may take, as estimated. */
export const DEFAULT_STATEMENT_CACHE_BYTES = 32 * 1024 * 1024;

/**
 * A statement estimated to take more than this share of the budget is run but not kept: one
 * such statement would push out hundreds of the small ones agents repeat.
 */
const LARGEST_SHARE = 16;

// What a prepared statement holds in the child, measured with RSS over 40 kept statements of
// each shape (better-sqlite3 12.11, x64): 2.9-3.3 KB for a 13-op SELECT; a 12,000-value IN list
// (92 KB of SQL, 36,020 ops) 1.75 MB, i.e. 19 bytes per SQL byte and 49 per op; a 90 KB string
// literal 4.8 per SQL byte (SQLite keeps the text, the program keeps the literal); 2,000 result
// columns 566 bytes each; and `SELECT *,*,…` over long column names 35,000 bytes per SQL byte,
// since every result column keeps its name. So SQL length alone misjudges by four orders of
// magnitude; the estimate counts the program and the columns as well, rounded up from the
// measures, so that it is never far below what a statement really costs.
const BASE_BYTES = 3 * 1024;
const BYTES_PER_SQL_BYTE = 5;
const BYTES_PER_OP = 56;
const BYTES_PER_COLUMN = 512;
const BYTES_PER_NAME_BYTE = 2;

/** What {@link statementCost} needs to know about one prepared statement. */
export interface StatementShape {
  /** UTF-8 bytes of its SQL. */
  sqlBytes: number;
  /** Instructions of its compiled program (rows of EXPLAIN). */
  programLength: number;
  /** Result columns, and the UTF-8 bytes of their names. */
  columns: number;
  nameBytes: number;
}

/** The estimated memory one prepared statement holds, in bytes (see the measures above). */
export function statementCost(s: StatementShape): number {
  return BASE_BYTES + s.sqlBytes * BYTES_PER_SQL_BYTE + s.programLength * BYTES_PER_OP + s.columns * BYTES_PER_COLUMN + s.nameBytes * BYTES_PER_NAME_BYTE;
}

interface Entry {
  db: Database;
  stmt: Statement;
  cost: number;
}

/** What the cache holds now, for operators and tests. */
export interface StatementCacheStats {
  /** Statements kept. */
  count: number;
  /** Their estimated memory, always at most `budget`. */
  bytes: number;
  budget: number;
}

/**
 * Guarded statements, kept across every open database of one executor child within a byte
 * budget, least recently used first.
 *
 * A count per database bounded nothing: 64 statements per open database, each an IN list of
 * 12,000 values (1.75 MB apiece), took a child from 102 MB to 839 MB, and the next call killed
 * it. So each statement is charged its estimated memory ({@link statementCost}), and the least
 * recently used — of any database — go when the total passes the budget. Statements pushed out
 * (and the EXPLAIN each miss prepares) are finalized when V8 collects them; measured over 200
 * such IN lists under the default budget, the child's RSS stayed between 130 and 215 MB.
 */
export class StatementCache {
  private readonly entries = new Map<string, Entry>();
  private readonly keysOf = new WeakMap<Database, Set<string>>();
  private readonly ids = new WeakMap<Database, number>();
  private readonly verdicts = new SharedVerdicts();
  private nextId = 1;
  private bytes = 0;
  /** The key set last in `entries` (its last in order), unless it has gone since. */
  private newest?: string;

  constructor(private budget: number = DEFAULT_STATEMENT_CACHE_BYTES) {
    StatementCache.checkBudget(budget);
  }

  /** Changes the budget (the child sets STATEMENT_CACHE_BYTES once), evicting what no longer fits. */
  setBudget(budget: number): void {
    StatementCache.checkBudget(budget);
    this.budget = budget;
    this.evictOverBudget();
  }

  /**
   * Agent SQL prepared through both guard layers, as a statement ready to run.
   *
   * A statement is cached only together with the verdict that let it through, under a key that
   * holds the mode: a statement admitted for 'write' is never handed out for 'read'. Refusals
   * and errors are not cached, since an error such as `no such table` changes with the schema.
   * `key` is {@link keyOf}'s for these three, given by a caller that looked it up before.
   * @throws AgentDbError with the guard's code and reason when the statement is refused.
   */
  checked(db: Database, sql: string, mode: CheckMode, key = this.keyOf(db, sql, mode)): Statement {
    const hit = this.hitOn(key);
    if (hit) return hit;
    const verdict = this.verdicts.check(db, sql, mode);
    if (!verdict.ok) throw new AgentDbError(verdict.code, verdict.reason);
    const stmt = verdict.stmt;
    if (verdict.singleRow) noteSingleRow(stmt);
    const columns = stmt.reader ? stmt.columns() : [];
    let nameBytes = 0;
    for (const c of columns) nameBytes += Buffer.byteLength(c.name);
    // A statement may carry copies of the schema's own text (an INSERT compiles every DEFAULT
    // it leaves out into its program): a red team's 4 MB of defaults made each cached INSERT
    // cost 4 MB that SQL, program length and columns did not show. So a statement costs at
    // least its database's schema text, measured once per schema version.
    const estimated = statementCost({ sqlBytes: Buffer.byteLength(sql), programLength: verdict.programLength, columns: columns.length, nameBytes });
    const cost = Math.max(estimated, schemaIdentity(db).bytes);
    if (cost > this.budget / LARGEST_SHARE) return stmt;
    this.entries.set(key, { db, stmt, cost });
    this.newest = key;
    let keys = this.keysOf.get(db);
    if (!keys) this.keysOf.set(db, (keys = new Set()));
    keys.add(key);
    this.bytes += cost;
    this.evictOverBudget();
    return stmt;
  }

  /**
   * The statement {@link checked} would hand out without judging or preparing anything: one
   * cached with its verdict for this mode, or undefined (a miss, which `checked` then judges).
   * `key` is {@link keyOf}'s for these three.
   */
  cached(db: Database, sql: string, mode: CheckMode, key = this.keyOf(db, sql, mode)): Statement | undefined {
    return this.hitOn(key);
  }

  /**
   * Where a statement of `db` is kept for `mode`. A read that misses asks {@link cached}, then
   * {@link checked}: it builds this once and gives it to both.
   */
  keyOf(db: Database, sql: string, mode: CheckMode): string {
    return `${this.idOf(db)}\u0000${mode}\u0000${sql}`;
  }

  private hitOn(key: string): Statement | undefined {
    const hit = this.entries.get(key);
    if (!hit) return undefined;
    // Re-insert so the Map's order is least-recently-used first; the newest is last already
    // (a statement repeated, the common case, costs one lookup).
    if (key !== this.newest) {
      this.entries.delete(key);
      this.entries.set(key, hit);
      this.newest = key;
    }
    return hit.stmt;
  }

  /**
   * Drops every cached statement of `db`: after the schema changed, so each verdict is taken
   * again against the schema the statement will now run on; and when its handle is closed.
   */
  forget(db: Database): void {
    const keys = this.keysOf.get(db);
    if (!keys) return;
    for (const key of keys) this.drop(key);
    this.keysOf.delete(db);
  }

  /** What the cache holds now. */
  stats(): StatementCacheStats {
    return { count: this.entries.size, bytes: this.bytes, budget: this.budget };
  }

  private idOf(db: Database): number {
    let id = this.ids.get(db);
    if (id === undefined) this.ids.set(db, (id = this.nextId++));
    return id;
  }

  private evictOverBudget(): void {
    while (this.bytes > this.budget) {
      const key = this.entries.keys().next().value!;
      const entry = this.entries.get(key)!;
      this.drop(key);
      this.keysOf.get(entry.db)?.delete(key);
    }
  }

  private drop(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.bytes -= entry.cost;
  }

  private static checkBudget(budget: number): void {
    if (!Number.isSafeInteger(budget) || budget < 0) throw new RangeError(`statement cache budget must be a non-negative integer, got ${budget}`);
  }
}

/**
 * The executor child's one cache: a child runs one statement at a time for every database it
 * holds, so one budget covers them all. The child sets its budget from STATEMENT_CACHE_BYTES.
 */
export const statementCache = new StatementCache();

/** {@link StatementCache.checked} on the child's cache. */
export function checkedStatement(db: Database, sql: string, mode: CheckMode, key?: string): Statement {
  return statementCache.checked(db, sql, mode, key);
}

/** {@link StatementCache.cached} on the child's cache. */
export function cachedStatement(db: Database, sql: string, mode: CheckMode, key?: string): Statement | undefined {
  return statementCache.cached(db, sql, mode, key);
}

/** {@link StatementCache.keyOf} on the child's cache. */
export function statementKey(db: Database, sql: string, mode: CheckMode): string {
  return statementCache.keyOf(db, sql, mode);
}

/** {@link StatementCache.forget} on the child's cache. */
export function forgetStatements(db: Database): void {
  statementCache.forget(db);
}
