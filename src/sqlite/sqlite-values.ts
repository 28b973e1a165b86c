import { positionalBindings } from '../guard/engine-check.ts';
import type { Statement } from 'better-sqlite3';
import { jsonBytes } from './result-budget.ts';
import { readShape } from './read-shape.ts';
import type { ResultSpill, SpilledResult } from './result-spill.ts';

/** A value an agent may bind: booleans bind as 1 and 0. */
export type Param = string | number | boolean | null;

/** A blob as it travels in JSON. */
export interface EncodedBlob {
  $blob: string;
}

/** A column value as results carry it: JSON-safe, integers past 2^53 as decimal strings. */
export type EncodedValue = string | number | null | EncodedBlob;

/**
 * Turns agent params into bindings. better-sqlite3 binds every JS number as REAL, which would
 * store `1` as `1.0` in an untyped column and defeat `typeof()` checks; integers are bound as
 * BigInt so SQLite sees INTEGER, as the agent wrote them.
 */
export function bindParams(params: readonly Param[]): unknown[] {
  return params.map((p) => {
    if (typeof p === 'boolean') return p ? 1n : 0n;
    if (typeof p === 'number' && Number.isSafeInteger(p)) return BigInt(p);
    return p;
  });
}

/**
 * One column value for a result. Statements read with `safeIntegers(true)`, so every INTEGER
 * arrives as a bigint: it becomes a number when that is exact, else a decimal string (JSON has
 * no 64-bit integers, and a rounded id is worse than a string). Blobs become `{ $blob: base64 }`.
 */
export function encodeValue(value: unknown): EncodedValue {
  if (typeof value === 'bigint') {
    return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value.toString();
  }
  if (Buffer.isBuffer(value)) return { $blob: value.toString('base64') };
  // REAL, TEXT and NULL are JSON as they are; NaN cannot come out of SQLite.
  return value as string | number | null;
}

/** Rows read from one statement, cut at a row count and a serialised size. */
export interface ReadRows {
  /** Column names; one past `MAX_NAME_BYTES` is shortened, ending `…[N bytes]`. */
  columns: string[];
  rows: EncodedValue[][];
  /** More rows existed than were returned. */
  truncated: boolean;
  /** Rows were cut because of their size, not their count. */
  oversize?: true;
  /** Set when the columns themselves were cut: why, and what to do instead. */
  note?: string;
  /** The whole result (up to `maxRows`), written to a file because it passed `maxBytes`. */
  spill?: SpilledResult;
}

/** Opens the file a result too large for its envelope is written to (see `ResultSpill`). */
export type SpillOpener = (columns: string[]) => ResultSpill;

/**
 * Reads at most `maxRows` rows of a statement that returns data, plus one more to learn whether
 * more existed; never `.all()` (but for a statement of one row at most), so a huge result is never held. Column names and rows together
 * are kept within `maxBytes` of JSON: names are shortened past `MAX_NAME_BYTES`, and when they
 * still take more than half of `maxBytes` (2,000 columns of long names do), they are cut to
 * what fits and no row is returned, since rows without their columns would be misread. Rows are
 * kept while they fit. Leaving the loop early resets the statement; it is always stepped at
 * least once, because a write's RETURNING makes its changes on the first step.
 *
 * A row's JSON is measured exactly only once the rows so far might not fit: until then an upper
 * bound of their size shows that they do, so a result well under the limit (nearly all of them)
 * is not stringified row by row only to be stringified again when it is sent. Which rows are kept
 * is the same either way: the row that could cross the limit, and every row after it, is judged
 * on exact sizes.
 *
 * With `spill`, a result cut for its size is not only cut: from the row that did not fit on, the
 * rows kept and every row after them (up to `maxRows`) go to a file as they are read, and the
 * answer carries the rows kept as a preview plus `spill`.
 */
export function readRows(stmt: Statement, bindings: unknown[], maxRows: number, maxBytes: number, spill?: SpillOpener): ReadRows {
  let spilling: ResultSpill | undefined;
  try {
    const read = readRowsInto(stmt, bindings, maxRows, maxBytes, spill && ((columns, rows) => (spilling = openSpill(spill, columns, rows))));
    return spilling ? { ...read, spill: spilling.finish() } : read;
  } catch (err) {
    spilling?.abort();
    throw err;
  }
}

function openSpill(open: SpillOpener, columns: string[], rows: EncodedValue[][]): ResultSpill {
  const spill = open(columns);
  for (const row of rows) if (!spill.encodedRow(row)) break;
  return spill;
}

function readRowsInto(
  stmt: Statement,
  bindings: unknown[],
  maxRows: number,
  maxBytes: number,
  startSpill?: (columns: string[], rows: EncodedValue[][]) => ResultSpill,
): ReadRows {
  const shape = readShape(stmt);
  // Shared by every read of this statement (and frozen): a result only carries it.
  const columns = shape.columns as string[];
  const columnBytes = shape.columnBytes;
  if (columnBytes > maxBytes / 2) return withoutRows(stmt, bindings, columns, maxBytes / 2);
  maxBytes -= columnBytes;
  const rows: EncodedValue[][] = [];
  // The enclosing [] plus, per row, its JSON and a comma: an upper bound until `exact`.
  let bytes = 2;
  let exact = false;
  let truncated = false;
  let oversize = false;
  let spilling: ResultSpill | undefined;
  let count = 0;
  // A statement of one row at most is read whole: the same row, without an iterator's cost.
  const source = shape.singleRow ? (stmt.all(...bindings) as unknown[][]) : (stmt.iterate(...bindings) as Iterable<unknown[]>);
  for (const raw of source) {
    if (count >= maxRows) {
      truncated = true;
      break;
    }
    count++;
    if (spilling) {
      // Past MAX_OFFLOAD_BYTES: stop reading; the spill says it was capped.
      if (!spilling.rawRow(raw)) break;
      continue;
    }
    if (!exact) {
      const bound = maximumSize(raw) + 1;
      if (bytes + bound <= maxBytes) {
        rows.push(raw.map(encodeValue));
        bytes += bound;
        continue;
      }
      bytes = exactSize(rows);
      exact = true;
    }
    // A lower bound first, so a 500 MB blob is never base64-encoded just to learn it is too big
    // (its encoding would not even fit in a JS string).
    if (bytes + minimumSize(raw) > maxBytes) {
      truncated = true;
      oversize = true;
      if (!startSpill) break;
      spilling = startSpill(columns, rows);
      spilling.rawRow(raw);
      continue;
    }
    const row = raw.map(encodeValue);
    // +1 for the comma between rows. Measured per row so the cut keeps every row that fits.
    const size = Buffer.byteLength(JSON.stringify(row)) + 1;
    if (bytes + size > maxBytes) {
      truncated = true;
      oversize = true;
      if (!startSpill) break;
      spilling = startSpill(columns, rows);
      spilling.encodedRow(row);
      continue;
    }
    rows.push(row);
    bytes += size;
  }
  return oversize ? { columns, rows, truncated, oversize: true } : { columns, rows, truncated };
}

/** What `readRows` answers when the column names alone do not fit: as many as fit, no rows. */
function withoutRows(stmt: Statement, bindings: unknown[], names: string[], maxBytes: number): ReadRows {
  const columns: string[] = [];
  let bytes = 2;
  for (const name of names) {
    const size = jsonBytes(name) + 1;
    if (bytes + size > maxBytes) break;
    columns.push(name);
    bytes += size;
  }
  // One step: a write's RETURNING has made its changes by then, and a query says whether it
  // had rows at all.
  let truncated = false;
  for (const _ of stmt.iterate(...bindings)) {
    truncated = true;
    break;
  }
  return {
    columns,
    rows: [],
    truncated,
    oversize: true,
    note: `the ${names.length} column names alone pass the result size limit, so ${columns.length} are listed and no rows are returned; select fewer columns, or name them with AS`,
  };
}

/** The exact size `readRows` counts for rows already kept. */
function exactSize(rows: EncodedValue[][]): number {
  let size = 2;
  for (const row of rows) size += Buffer.byteLength(JSON.stringify(row)) + 1;
  return size;
}

/**
 * The most bytes `raw` can take as JSON once encoded: a UTF-16 unit is at most 6 bytes (`\uXXXX`),
 * a blob is `{"$blob":"…"}` around its base64, and a number or integer string at most 24.
 */
function maximumSize(raw: unknown[]): number {
  let size = 2;
  for (const value of raw) {
    if (typeof value === 'string') size += value.length * 6 + 3;
    else if (Buffer.isBuffer(value)) size += Math.ceil(value.length / 3) * 4 + 13;
    else size += 25;
  }
  return size;
}

/** The fewest bytes `raw` can take as JSON: strings only grow when escaped, base64 is 4/3. */
function minimumSize(raw: unknown[]): number {
  let size = 2;
  for (const value of raw) {
    if (typeof value === 'string') size += value.length + 3;
    else if (Buffer.isBuffer(value)) size += Math.ceil(value.length / 3) * 4 + 13;
    else size += 2;
  }
  return size;
}

// Only SQL that may hold ?NNN or named parameters needs its parameters mapped.
const NUMBERED_OR_NAMED = /\?\d|[:@$][\p{L}\p{N}_]/u;

/**
 * An agent's positional `params` as better-sqlite3 must receive them: it binds `?NNN` and named
 * parameters by name only, so `a = ?1 OR b = ?1` with one value would fail; the guard maps the
 * values onto SQLite's own numbering.
 */
export function agentBindings(sql: string, params: readonly Param[]): unknown[] {
  const bound = bindParams(params);
  return bound.length && NUMBERED_OR_NAMED.test(sql) ? positionalBindings(sql, bound) : bound;
}
