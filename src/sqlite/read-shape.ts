import type { Statement } from 'better-sqlite3';
import { jsonBytes, shortened } from './result-budget.ts';

/** What reading a statement's rows into a result needs before its first row (see `readRows`). */
export interface ReadShape {
  /** Column names as results carry them (see `shortened`); frozen, since every read shares them. */
  readonly columns: readonly string[];
  /** Their size as JSON. */
  readonly columnBytes: number;
  /** It returns at most one row (see {@link noteSingleRow}). */
  readonly singleRow: boolean;
}

const shapes = new WeakMap<Statement, ReadShape>();
const singleRows = new WeakSet<Statement>();

/**
 * Says that `stmt` returns at most one row, whatever its parameters, as the guard read its
 * program (`singleRow`): such a statement is read with one `all()`, which holds no more than
 * the one row `iterate()` would, and costs a third less than an iterator (4.8 against 10.4 µs
 * for a PK read, most of the rest being better-sqlite3's iterator object). Before its first read.
 */
export function noteSingleRow(stmt: Statement): void {
  singleRows.add(stmt);
}

/**
 * `stmt` set to read rows as results encode them (INTEGERs as bigint, rows as arrays), and its
 * columns, worked out once per statement object. A PK read repeats one cached statement, and
 * `columns()` plus the two setters took about a fifth of its time in SQLite and better-sqlite3
 * (3.5 of ~15 µs). Kept as long as the statement is: the statement cache hands a statement out
 * again only while its schema stands (it forgets a handle's statements when a write moves the
 * schema, and a handle another child wrote through is reopened), as it does the guard's verdict
 * on it. Nothing else in agentdb sets these flags back on an agent's statement.
 */
export function readShape(stmt: Statement): ReadShape {
  let shape = shapes.get(stmt);
  if (!shape) {
    stmt.safeIntegers(true);
    stmt.raw(true);
    const columns = Object.freeze(stmt.columns().map((c) => shortened(c.name)));
    shape = { columns, columnBytes: jsonBytes(columns), singleRow: singleRows.has(stmt) };
    shapes.set(stmt, shape);
  }
  return shape;
}
