import type { Statement } from 'better-sqlite3';
import { jsonBytes, shortened } from './result-budget.ts';

/** What reading a statement's rows into a result needs before its first row (see `readRows`). */
export interface ReadShape {
  /** Column names as results carry them (see `shortened`); frozen, since every read shares them. */
  readonly columns: readonly string[];
  /** Their size as JSON. */
  readonly columnBytes: number;
}

const shapes = new WeakMap<Statement, ReadShape>();

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
    shape = { columns, columnBytes: jsonBytes(columns) };
    shapes.set(stmt, shape);
  }
  return shape;
}
