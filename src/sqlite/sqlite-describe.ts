import type { Database } from 'better-sqlite3';
import { MAX_DETAIL_BYTES } from '../errors.ts';
import { jsonBytes, shortened } from './result-budget.ts';
import { AGENT_OBJECTS } from './sqlite-schema.ts';
import { inRolledBackRead, quoteIdentifier, trusted } from './sqlite-trusted.ts';

// Every name, declared type and default below is shortened past MAX_NAME_BYTES (`…[N bytes]`).

/** One column of a table or view. */
export interface ColumnInfo {
  name: string;
  /** The declared type, as written (SQLite types are affinities); '' when none was given. */
  type: string;
  notNull: boolean;
  /** The default as SQL text (`'new'`, `0`, `CURRENT_TIMESTAMP`), or null. */
  default: string | null;
  primaryKey: boolean;
}

/** One foreign key column: `from` in this table refers to `table`.`to`. */
export interface ForeignKeyInfo {
  from: string;
  table: string;
  /** The referenced column; null when the key refers to the other table's primary key implicitly. */
  to: string | null;
}

/** One index, including those SQLite creates for UNIQUE and PRIMARY KEY constraints. */
export interface IndexInfo {
  /**
   * The name CREATE INDEX gave it. Absent for an index behind a constraint: SQLite names those
   * `sqlite_autoindex_…`, a name the guard refuses, so showing it only invites a refusal.
   */
  name?: string;
  unique: boolean;
  /** Indexed columns in order; an expression appears as `(expression)`. */
  columns: string[];
  /** Set when the index is SQLite's own behind a UNIQUE or (non-rowid) PRIMARY KEY constraint. */
  constraint?: 'unique' | 'primary key';
}

/** A table or view as an agent sees it. */
export interface TableInfo {
  name: string;
  type: 'table' | 'view';
  columns: ColumnInfo[];
  foreignKeys: ForeignKeyInfo[];
  indexes: IndexInfo[];
  /** Rows in a table; absent for views, whose count could cost a full query. */
  rowCount?: number;
  /** Why a view could not be described (it refers to something that no longer exists). */
  error?: string;
}

/** A table or view listed by name only: its description did not fit in the result. */
export interface TableStub {
  name: string;
  type: 'table' | 'view';
  truncated: true;
}

/** What DATA_DESCRIBE_SCHEMA answers. */
export interface DescribeResult {
  tables: (TableInfo | TableStub)[];
  /** Set when the description was cut to fit the result size: some tables are stubs or left out. */
  truncated?: true;
  /** Tables and views left out entirely (not even listed by name). */
  omitted?: number;
  /** What was cut, and how to read the rest. */
  note?: string;
}

/** Room kept for `truncated`, `omitted` and `note` once a description is cut. */
const NOTE_BYTES = 512;

/**
 * The agent-visible schema: every table and view with columns, foreign keys, indexes and row
 * counts. The engine's `sqlite_*` objects and agentdb's `_agentdb_*` tables are hidden. Runs in
 * one rolled-back read so the counts and the schema agree.
 *
 * The answer fits in `maxBytes` of JSON (it is free, and an agent-writable schema can be made
 * to describe itself in 54 MB): every name, type and default past `MAX_NAME_BYTES` is
 * shortened; tables are described in full, in name order, while they fit; the rest are listed
 * by name (`truncated: true` on each) while those fit, and only counted (`omitted`) after that.
 */
export function describe(db: Database, maxBytes = Number.MAX_SAFE_INTEGER): DescribeResult {
  return inRolledBackRead(db, () => {
    const objects = trusted(db, `SELECT name, type FROM sqlite_schema WHERE type IN ('table', 'view') AND ${AGENT_OBJECTS} ORDER BY name`).all() as {
      name: string;
      type: 'table' | 'view';
    }[];
    const tables: (TableInfo | TableStub)[] = [];
    const sizes: number[] = [];
    // {"tables":[]}, and each table with a comma.
    let bytes = 13;
    let i = 0;
    for (; i < objects.length; i++) {
      const info = describeOne(db, objects[i]!.name, objects[i]!.type);
      const size = jsonBytes(info) + 1;
      if (bytes + size > maxBytes) break;
      tables.push(info);
      sizes.push(size);
      bytes += size;
    }
    if (i === objects.length) return { tables };
    // Cut: room for the note first (giving back tables described in full if need be), then the
    // rest by name while they fit.
    const limit = maxBytes - NOTE_BYTES;
    while (bytes > limit && tables.length) {
      tables.pop();
      bytes -= sizes.pop()!;
      i--;
    }
    const full = tables.length;
    for (; i < objects.length; i++) {
      const stub: TableStub = { name: shortened(objects[i]!.name), type: objects[i]!.type, truncated: true };
      const size = jsonBytes(stub) + 1;
      if (bytes + size > limit) break;
      tables.push(stub);
      bytes += size;
    }
    const omitted = objects.length - tables.length;
    const stubs = tables.length - full;
    return {
      tables,
      truncated: true,
      omitted,
      note:
        `the schema passes the result size limit: ${full} of ${objects.length} tables and views are described in full, ` +
        `${stubs} more listed by name only${omitted ? `, and ${omitted} left out` : ''}; ` +
        'read the columns of one with DATA_QUERY_SQL (SELECT * FROM name LIMIT 0)',
    };
  });
}

function describeOne(db: Database, name: string, type: 'table' | 'view'): TableInfo {
  const info: TableInfo = { name: shortened(name), type, columns: [], foreignKeys: [], indexes: [] };
  try {
    info.columns = columnsOf(db, name);
  } catch (err) {
    // A view over a dropped table cannot be expanded; say so rather than fail the whole call.
    info.error = shortened(err instanceof Error ? err.message : String(err), MAX_DETAIL_BYTES);
    return info;
  }
  if (type === 'view') return info;
  info.foreignKeys = (trusted(db, `SELECT "from", "table", "to" FROM pragma_foreign_key_list(?, 'main') ORDER BY id, seq`).all(name) as ForeignKeyInfo[]).map(
    (fk) => ({ from: shortened(fk.from), table: shortened(fk.table), to: fk.to === null ? null : shortened(fk.to) }),
  );
  const indexes = trusted(db, `SELECT name, "unique", origin FROM pragma_index_list(?, 'main') ORDER BY name`).all(name) as {
    name: string;
    unique: number;
    /** `c`: CREATE INDEX; `u`: a UNIQUE constraint; `pk`: a PRIMARY KEY constraint. */
    origin: 'c' | 'u' | 'pk';
  }[];
  info.indexes = indexes.map((ix) => {
    const columns = (trusted(db, `SELECT name FROM pragma_index_info(?, 'main') ORDER BY seqno`).pluck().all(ix.name) as (string | null)[]).map((c) =>
      c === null ? '(expression)' : shortened(c),
    );
    if (ix.origin === 'c') return { name: shortened(ix.name), unique: ix.unique === 1, columns };
    return { unique: true, columns, constraint: ix.origin === 'pk' ? 'primary key' : 'unique' };
  });
  // count(*) walks the smallest index; tables are bounded by the plan's size limit.
  info.rowCount = db
    .prepare(`SELECT count(*) FROM main.${quoteIdentifier(name)}`)
    .pluck()
    .get() as number;
  return info;
}

function columnsOf(db: Database, name: string): ColumnInfo[] {
  // table_xinfo also lists generated columns; hidden = 1 marks a virtual table's hidden ones.
  const rows = trusted(db, `SELECT name, type, "notnull", dflt_value, pk, hidden FROM pragma_table_xinfo(?, 'main') ORDER BY cid`).all(name) as {
    name: string;
    type: string;
    notnull: number;
    dflt_value: string | null;
    pk: number;
    hidden: number;
  }[];
  return rows
    .filter((c) => c.hidden !== 1)
    .map((c) => ({
      name: shortened(c.name),
      type: shortened(c.type),
      notNull: c.notnull === 1,
      default: c.dflt_value === null ? null : shortened(c.dflt_value),
      primaryKey: c.pk > 0,
    }));
}
