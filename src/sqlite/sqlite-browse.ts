import type { Database } from 'better-sqlite3';
import type { CursorValue, GridCell, GridPage, PageArgs, PageCursor } from '../contracts/browse.ts';
import { AgentDbError } from '../errors.ts';
import { AGENT_OBJECTS } from './sqlite-schema.ts';
import { inRolledBackRead, quoteIdentifier, trusted } from './sqlite-trusted.ts';

/** Longest text shown in a grid cell; the full value is in the CSV export. */
const CELL_CHARS = 500;

/** A table or view as the browser reads it: its columns and the name that reaches its rowid. */
export interface Shape {
  name: string;
  type: 'table' | 'view';
  columns: { name: string; type: string; primaryKey: boolean }[];
  /** The name that reaches the rowid, or undefined (views, WITHOUT ROWID, every alias shadowed). */
  key?: string;
}

/**
 * The table or view `table` as the browser may read it, or NOT_FOUND. Names come from a
 * person's URL: they are looked up in the schema (internal objects excluded) and only the
 * stored names, quoted, ever reach SQL.
 */
export function shapeOf(db: Database, table: string): Shape {
  const found = trusted(db, `SELECT name, type FROM sqlite_schema WHERE name = ? COLLATE NOCASE AND type IN ('table', 'view') AND ${AGENT_OBJECTS}`).get(
    table,
  ) as { name: string; type: 'table' | 'view' } | undefined;
  if (!found) throw new AgentDbError('NOT_FOUND', `there is no table or view named ${JSON.stringify(table)}`);
  const columns = (
    trusted(db, `SELECT name, type, pk, hidden FROM pragma_table_xinfo(?, 'main') ORDER BY cid`).all(found.name) as {
      name: string;
      type: string;
      pk: number;
      hidden: number;
    }[]
  )
    .filter((c) => c.hidden !== 1)
    .map((c) => ({ name: c.name, type: c.type, primaryKey: c.pk > 0 }));
  let key: string | undefined;
  if (found.type === 'table') {
    const taken = new Set(columns.map((c) => c.name.toLowerCase()));
    const alias = ['rowid', '_rowid_', 'oid'].find((a) => !taken.has(a));
    // A WITHOUT ROWID table has none: preparing a read of it says so.
    if (alias) {
      try {
        db.prepare(`SELECT ${alias} FROM main.${quoteIdentifier(found.name)} LIMIT 0`);
        key = alias;
      } catch {
        key = undefined;
      }
    }
  }
  return { name: found.name, type: found.type, columns, key };
}

/** A value as read (safe integers) → its exact cursor form. */
export function toCursorValue(v: unknown): CursorValue {
  if (v === null || v === undefined) return { t: 'n' };
  if (typeof v === 'bigint') return { t: 'i', v: v.toString() };
  if (typeof v === 'number') return { t: 'r', v };
  if (Buffer.isBuffer(v)) return { t: 'b', v: v.toString('hex') };
  return { t: 's', v: String(v) };
}

/** A cursor's value → the value to bind (its exact type: integers as bigint, blobs as bytes). */
export function fromCursorValue(c: CursorValue): unknown {
  switch (c.t) {
    case 'n':
      return null;
    case 'i':
      return BigInt(c.v);
    case 'r':
      return c.v;
    case 's':
      return c.v;
    case 'b':
      return Buffer.from(c.v, 'hex');
  }
}

/** UTF-8 bytes of a text cell read whole; a longer one is read as its first this many bytes. */
const CELL_BYTES = CELL_CHARS * 4;

/**
 * A grid column as read: long text cut and blobs left out in SQL, plus their length, so a page
 * never holds a value whole. A view's row costs its agent nothing to store and can be any size
 * (`printf('%.*c', …)`); read whole, a page of them would pass the executor child's memory limit.
 * Text is cut as bytes (a blob): SQLite's length() and substr() of text stop at a NUL character,
 * which would hide what an agent wrote after one. The length is text's UTF-8 bytes, or -1 - a
 * blob's bytes, or NULL for numbers and NULL.
 */
function gridColumn(name: string): string {
  const q = quoteIdentifier(name);
  return (
    `CASE typeof(${q}) WHEN 'text' THEN (CASE WHEN octet_length(${q}) > ${CELL_BYTES} THEN substr(CAST(${q} AS BLOB), 1, ${CELL_BYTES}) ELSE ${q} END) ` +
    `WHEN 'blob' THEN NULL ELSE ${q} END, ` +
    `CASE typeof(${q}) WHEN 'text' THEN octet_length(${q}) WHEN 'blob' THEN -1 - octet_length(${q}) END`
  );
}

function cell(v: unknown, length: unknown): GridCell {
  if (typeof length === 'bigint' && length < 0n) return { blob: Number(-1n - length) };
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint') return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
  if (typeof v === 'number') return v;
  // Text longer than CELL_BYTES arrives as its first bytes; CELL_CHARS characters fit in them whole.
  const s = Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
  return s.length > CELL_CHARS ? { cut: s.slice(0, CELL_CHARS), length: Number(length) } : s;
}

/**
 * The WHERE of a keyset page: rows strictly past `c` in the order (sort, key) `dir`. SQLite
 * sorts NULL first ascending; a row value comparison with NULL is never true, so NULLs are
 * handled by hand. The row value form lets SQLite seek an index on the sort column.
 */
export function keysetWhere(sort: string | undefined, key: string, dir: 'asc' | 'desc', c: PageCursor): { sql: string; binds: unknown[] } {
  const op = dir === 'asc' ? '>' : '<';
  const k = fromCursorValue(c.k);
  if (!sort) return { sql: `${key} ${op} ?`, binds: [k] };
  const s = quoteIdentifier(sort);
  const v = c.v ? fromCursorValue(c.v) : null;
  if (v === null) {
    return dir === 'asc' ? { sql: `((${s} IS NULL AND ${key} > ?) OR ${s} IS NOT NULL)`, binds: [k] } : { sql: `(${s} IS NULL AND ${key} < ?)`, binds: [k] };
  }
  const past = `(${s}, ${key}) ${op} (?, ?)`;
  return dir === 'asc' ? { sql: past, binds: [v, k] } : { sql: `(${past} OR ${s} IS NULL)`, binds: [v, k] };
}

/**
 * Longest sort value a cursor carries itself (as JSON). A page link holds its cursor, and a
 * request line past 16 KB is refused (431): past this, a cursor carries only its row's key and
 * the sort value is read back from that row ({@link sortValueAt}).
 */
const CURSOR_VALUE_CHARS = 1000;

function sortCursorValue(v: unknown): { v?: CursorValue } {
  const c = toCursorValue(v);
  return JSON.stringify(c).length > CURSOR_VALUE_CHARS ? {} : { v: c };
}

/** A cursor's sort value, from its row when the cursor carries only the key. */
function sortValueAt(db: Database, from: string, key: string, sort: string, c: PageCursor): PageCursor {
  if (c.v !== undefined) return c;
  const row = db
    .prepare(`SELECT ${quoteIdentifier(sort)} FROM ${from} WHERE ${key} = ?`)
    .raw(true)
    .safeIntegers(true)
    .get(fromCursorValue(c.k)) as unknown[] | undefined;
  if (!row) throw new AgentDbError('NOT_FOUND', 'the row this page link starts from is gone; start from the first page');
  return { ...c, v: toCursorValue(row[0]) };
}

/** The ORDER BY of a read: the sort column, then the key, both `dir`. */
export function orderBy(sort: string | undefined, key: string | undefined, dir: 'asc' | 'desc'): string {
  const d = dir.toUpperCase();
  const parts = [...(sort ? [`${quoteIdentifier(sort)} ${d}`] : []), ...(key ? [`${key} ${d}`] : [])];
  return parts.length ? ` ORDER BY ${parts.join(', ')}` : '';
}

/**
 * The column list of a read, with the key (and the sort column again) appended for cursors; for
 * the grid, two per column (see {@link gridColumn}).
 */
export function selectList(shape: Shape, sort: string | undefined, grid = false): string {
  const cols = shape.columns.map((c) => (grid ? gridColumn(c.name) : quoteIdentifier(c.name)));
  if (shape.key) cols.push(shape.key);
  if (sort && shape.key) cols.push(quoteIdentifier(sort));
  return cols.join(', ');
}

/**
 * One page of a table for the grid. Keyset paging on (sort column, rowid) so page 5,000 costs
 * what page 1 does; a jump to a page uses OFFSET (it walks the skipped rows: still in SQLite,
 * never sent). Views and WITHOUT ROWID tables page by offset.
 */
export function browsePage(db: Database, args: Required<Pick<PageArgs, 'dir' | 'limit'>> & PageArgs): GridPage {
  const started = performance.now();
  return inRolledBackRead(db, () => {
    const shape = shapeOf(db, args.table);
    if (args.sort !== undefined && !shape.columns.some((c) => c.name === args.sort)) {
      throw new AgentDbError('INVALID_ARGUMENTS', `${JSON.stringify(shape.name)} has no column named ${JSON.stringify(args.sort)}`);
    }
    const from = `main.${quoteIdentifier(shape.name)}`;
    const backwards = args.before !== undefined && shape.key !== undefined;
    const dir = backwards ? (args.dir === 'asc' ? 'desc' : 'asc') : args.dir;
    const given = backwards ? args.before : shape.key ? args.after : undefined;
    const cursor = given && shape.key && args.sort ? sortValueAt(db, from, shape.key, args.sort, given) : given;
    const where = cursor && shape.key ? keysetWhere(args.sort, shape.key, dir, cursor) : undefined;
    const offset = shape.key && (cursor || args.offset === undefined) ? undefined : (args.offset ?? 0);
    const sql =
      `SELECT ${selectList(shape, args.sort, true)} FROM ${from}` +
      (where ? ` WHERE ${where.sql}` : '') +
      orderBy(args.sort, shape.key, dir) +
      ` LIMIT ?` +
      (offset !== undefined ? ' OFFSET ?' : '');
    const binds = [...(where?.binds ?? []), args.limit + 1, ...(offset !== undefined ? [offset] : [])];
    const raw = (
      db
        .prepare(sql)
        .raw(true)
        .safeIntegers(true)
        .all(...binds) as unknown[][]
    ).slice(0);
    const more = raw.length > args.limit;
    if (more) raw.pop();
    if (backwards) raw.reverse();
    // Two grid columns per table column come first, then the key and the sort column.
    const n = shape.columns.length * 2;
    const cursorOf = (r: unknown[]): PageCursor | undefined =>
      shape.key ? { k: toCursorValue(r[n]), ...(args.sort ? sortCursorValue(r[n + 1]) : {}) } : undefined;
    const page: GridPage = {
      table: shape.name,
      type: shape.type,
      columns: shape.columns,
      rows: raw.map((r) => shape.columns.map((_, i) => cell(r[2 * i], r[2 * i + 1]))),
      hasPrev: backwards ? more : cursor !== undefined || (offset ?? 0) > 0,
      hasNext: backwards ? true : more,
      keyset: shape.key !== undefined,
      sqliteMs: 0,
    };
    if (raw.length) {
      const first = cursorOf(raw[0]!);
      const last = cursorOf(raw[raw.length - 1]!);
      if (first) page.first = first;
      if (last) page.last = last;
    }
    if (offset !== undefined) page.offset = offset;
    else if (!cursor) page.offset = 0;
    // A view's count runs its whole query, which an agent can make endless (DATA_DESCRIBE_SCHEMA
    // does not count views either): its pages go without a total.
    if (args.count && shape.type === 'table') page.total = Number(trusted(db, `SELECT count(*) FROM ${from}`).pluck().get());
    page.sqliteMs = performance.now() - started;
    return page;
  });
}
