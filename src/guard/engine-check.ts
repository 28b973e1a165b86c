import type { Database, Statement } from 'better-sqlite3';
import { programRefusal, type Op, type SchemaObject } from './bytecode.ts';
import type { StatementKind } from './classifier.ts';
import { guardIntrospection, guardQuery, guardWrite, parseStatement } from './guard.ts';
import { viewBodyStart } from './rules.ts';
import { singleRow } from './single-row.ts';
import { tokenize, type Token } from './tokenizer.ts';

/** How a statement will be used: DATA_QUERY_SQL, DATA_WRITE_SQL, or db_query's PRAGMA list. */
export type CheckMode = 'read' | 'write' | 'introspect';

/** The second layer's answer: a prepared statement, or a refusal with a registry code. */
export type CheckedStatement =
  /**
   * `programLength`: instructions in its compiled program, a measure of the memory it holds;
   * `start`: where in the SQL the prepared statement begins (past leading comments and `;`);
   * `singleRow`: it returns at most one row, whatever its parameters (see `singleRow`).
   */
  | { ok: true; stmt: Statement; programLength: number; start: number; singleRow: boolean }
  | { ok: false; code: 'SQL_SYNTAX' | 'SQL_MULTIPLE_STATEMENTS' | 'SQL_REFUSED' | 'SQL_ERROR'; reason: string };

type Refused = Extract<CheckedStatement, { ok: false }>;

const LAYER_ONE = { read: guardQuery, write: guardWrite, introspect: guardIntrospection } as const;

/**
 * Both guard layers over one agent statement. Layer 1 (the tokenizer) first; then SQLite
 * itself: `prepare()` (one statement only), `readonly` and `reader` for reads, and the compiled
 * program read back with EXPLAIN, so that what a name resolved to — not how it was spelled —
 * decides: no b-tree outside the main database, none of the engine's or agentdb's own tables,
 * no virtual table but json_each/json_tree, no forbidden function.
 *
 * Errors that are not about the statement (a corrupt file, a busy database, out of memory)
 * are thrown as better-sqlite3 threw them, for the store to map.
 */
export function prepareChecked(db: Database, sql: string, mode: CheckMode): CheckedStatement {
  // Layer 1 must come first, not only for depth: SQLite applies a PRAGMA while *preparing* it
  // (`PRAGMA trusted_schema=ON` flips the flag inside prepare()), so nothing refused by its
  // tokens may ever reach prepare().
  const verdict = LAYER_ONE[mode](sql);
  if (!verdict.ok) return verdict;
  return engineCheck(db, sql, mode, verdict.kind);
}

/**
 * Layer 2 alone, judging `sql` as layer 1 classified it (`kind`). Exported so tests can show
 * it stands on its own; callers use {@link prepareChecked}, since preparing a PRAGMA applies it.
 */
export function engineCheck(db: Database, sql: string, mode: CheckMode, kind: StatementKind): CheckedStatement {
  // From the first token on: what precedes it is whitespace, comments or empty statements, and
  // EXPLAIN must be prepended to the statement itself.
  const parsed = parseStatement(sql);
  const start = 'ok' in parsed ? 0 : parsed.tokens[0]!.offset;
  const text = sql.slice(start);

  let stmt: Statement;
  let ops: Op[];
  try {
    stmt = db.prepare(text);
    // The program does not depend on parameter values, but better-sqlite3 will not run a
    // statement with unbound parameters, so EXPLAIN gets NULL for each.
    ops = db.prepare(`EXPLAIN ${text}`).all(...nullBindings('ok' in parsed ? [] : parsed.tokens)) as Op[];
  } catch (err) {
    return fromSqlite(err);
  }
  if (mode !== 'write' && !(stmt.readonly && stmt.reader)) {
    return { ok: false, code: 'SQL_REFUSED', reason: 'SQLite reports that this statement would write; DATA_QUERY_SQL only reads (use DATA_WRITE_SQL)' };
  }
  const refusal =
    programRefusal(ops, {
      kind,
      mode,
      roots: rootPages(db),
      allowedVtabs: ops.some((op) => op.opcode === 'VOpen') ? jsonVtabs(db) : new Set(),
    }) ?? (kind === 'create_view' && !('ok' in parsed) ? viewRefusal(db, sql, parsed.tokens) : undefined);
  if (refusal) return { ok: false, code: 'SQL_REFUSED', reason: refusal };
  return { ok: true, stmt, programLength: ops.length, start, singleRow: singleRow(ops) };
}

/**
 * CREATE VIEW compiles nothing of its SELECT: what the view reads is only seen when it is
 * queried. So the SELECT is compiled here on its own and judged as a read, and a view that would
 * read the engine's or agentdb's tables, a PRAGMA or page table, or another schema is refused
 * at creation too (such a view would otherwise sit in the schema, its columns listed by
 * DATA_DESCRIBE_SCHEMA). A SELECT that does not compile yet (it names a table still to be
 * created, which SQLite allows) is left to be judged when the view is queried.
 */
function viewRefusal(db: Database, sql: string, tokens: readonly Token[]): string | undefined {
  const start = viewBodyStart(tokens, 0);
  if (start < 0) return undefined; // SQLite compiled it, so this cannot happen; the query check stands
  const body = sql.slice(tokens[start]!.offset);
  let ops: Op[];
  try {
    ops = db.prepare(`EXPLAIN ${body}`).all() as Op[];
  } catch (err) {
    if ((err as { code?: unknown } | null)?.code === 'SQLITE_ERROR') return undefined;
    throw err;
  }
  const refusal = programRefusal(ops, {
    kind: 'select',
    mode: 'read',
    roots: rootPages(db),
    allowedVtabs: ops.some((op) => op.opcode === 'VOpen') ? jsonVtabs(db) : new Set(),
  });
  return refusal && `the view would read what agents may not: ${refusal}`;
}

/** How SQLite numbers one statement's parameters: how many, and the name of each named one. */
interface ParameterSlots {
  count: number;
  /** Number → name as written (with its `?`/`:`/`@`/`$`/`#`), for named and `?NNN` ones. */
  nameOf: Map<number, string>;
}

/**
 * The numbering of SQLite's `sqlite3ExprAssignVarNumber`: `?` takes the next number, `?NNN`
 * takes NNN (naming it, if still unnamed), a name reuses its earlier number or takes the next.
 */
function parameterSlots(tokens: readonly Token[]): ParameterSlots {
  let count = 0;
  const numberOf = new Map<string, number>();
  const nameOf = new Map<number, string>();
  for (const t of tokens) {
    if (t.kind !== 'param') continue;
    if (t.text === '?') {
      count++;
    } else if (t.text.startsWith('?')) {
      const n = Number(t.text.slice(1));
      if (n > count) count = n;
      if (!nameOf.has(n)) {
        nameOf.set(n, t.text);
        numberOf.set(t.text, n);
      }
    } else if (!numberOf.has(t.text)) {
      count++;
      numberOf.set(t.text, count);
      nameOf.set(count, t.text);
    }
  }
  return { count, nameOf };
}

/**
 * Values shaped as better-sqlite3 binds them: an array for the unnamed numbers in order, then
 * one object keyed by name without its prefix (`?NNN` is a name to better-sqlite3: key `NNN`).
 * The object has no prototype, so a parameter called `:constructor` is an own key like any.
 */
function shapeBindings(slots: ParameterSlots, valueAt: (n: number) => unknown): unknown[] {
  const anonymous: unknown[] = [];
  const named: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (let n = 1; n <= slots.count; n++) {
    const name = slots.nameOf.get(n);
    if (name === undefined) anonymous.push(valueAt(n));
    else if (!Object.hasOwn(named, name.slice(1))) named[name.slice(1)] = valueAt(n);
  }
  return slots.nameOf.size === 0 ? anonymous : [...anonymous, named];
}

/**
 * NULL for every parameter of a statement, shaped as better-sqlite3 binds them (see
 * {@link shapeBindings}), so EXPLAIN can run a statement whose values are not known yet.
 */
export function nullBindings(tokens: readonly Token[]): unknown[] {
  return shapeBindings(parameterSlots(tokens), () => null);
}

/**
 * The values an agent sends, in parameter-number order, shaped for better-sqlite3. Plain `?`
 * needs nothing, but better-sqlite3 treats `?NNN` and `:name` as named and would bind none of
 * them from a list: `WHERE a = ?1 OR b = ?1` with `[v]` failed with "Too many parameter
 * values". Value k goes to parameter number k. When the counts differ, or the SQL does not
 * tokenize, the values come back unchanged for better-sqlite3 to report the mismatch.
 */
export function positionalBindings(sql: string, values: readonly unknown[]): unknown[] {
  const lexed = tokenize(sql);
  if (!lexed.ok) return [...values];
  const slots = parameterSlots(lexed.tokens);
  if (slots.nameOf.size === 0 || slots.count !== values.length) return [...values];
  return shapeBindings(slots, (n) => values[n - 1]);
}

/** Root page → object of the main schema (views have root 0 and are left out). */
function rootPages(db: Database): Map<number, SchemaObject> {
  const rows = db.prepare('SELECT type, name, tbl_name, rootpage FROM main.sqlite_schema WHERE rootpage > 0').all() as SchemaObject[];
  return new Map(rows.map((r) => [r.rootpage, r]));
}

/**
 * The `vtab:` pointers EXPLAIN shows for json_each and json_tree. An eponymous virtual table
 * is one object per connection, so its pointer identifies it; EXPLAIN QUERY PLAN would only
 * show the alias, which the agent chooses.
 */
function jsonVtabs(db: Database): Set<string> {
  const found = new Set<string>();
  for (const fn of ['json_each', 'json_tree']) {
    let ops: Op[];
    try {
      ops = db.prepare(`EXPLAIN SELECT * FROM ${fn}('[]')`).all() as Op[];
    } catch {
      continue; // an agent table of that name hides the function: nothing to allow
    }
    for (const op of ops) if (op.opcode === 'VOpen') found.add(String(op.p4));
  }
  return found;
}

/** Maps a prepare() failure to a registry code; rethrows what is not about the statement. */
function fromSqlite(err: unknown): Refused {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof RangeError && /more than one statement/.test(message)) {
    return { ok: false, code: 'SQL_MULTIPLE_STATEMENTS', reason: 'SQLite found more than one statement; send one statement per call' };
  }
  if (err instanceof RangeError && /no statements/.test(message)) {
    return { ok: false, code: 'SQL_SYNTAX', reason: 'the SQL holds no statement' };
  }
  const code = (err as { code?: unknown } | null)?.code;
  if (code === 'SQLITE_AUTH') return { ok: false, code: 'SQL_REFUSED', reason: message };
  if (code !== 'SQLITE_ERROR') throw err;
  if (/syntax error|unrecognized token|incomplete input/.test(message)) return { ok: false, code: 'SQL_SYNTAX', reason: message };
  if (/may not be|reserved for internal use|unsafe use of|not authorized|prohibited/.test(message)) {
    return { ok: false, code: 'SQL_REFUSED', reason: message };
  }
  return { ok: false, code: 'SQL_ERROR', reason: message };
}

/**
 * Hardens a connection before any agent SQL runs on it.
 *
 * - `trusted_schema=OFF`: functions and virtual tables not marked innocuous cannot run from
 *   views, triggers, CHECK, DEFAULT or generated columns, whoever wrote the schema.
 * - Defensive mode (SQLITE_DBCONFIG_DEFENSIVE: no writable_schema, no writes to sqlite_dbpage
 *   or shadow tables): better-sqlite3 12 turns it on in its Database constructor
 *   (src/objects/database.cpp) and off only in `unsafeMode(true)`; `unsafeMode(false)` sets it
 *   on again, which is the one switch JavaScript has for it.
 * - Extensions: better-sqlite3 enables SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, which allows the
 *   C API (`db.loadExtension`, never called with agent input) but leaves the SQL function
 *   `load_extension()` disabled; there is no JavaScript switch to turn the C API off. The guard
 *   refuses the function by name and by bytecode in any case.
 * - `temp_store=MEMORY`: this build keeps temporary data in files by default, so a sort, a
 *   DISTINCT or an index build larger than the page cache would write spill files to the
 *   system's temp folder — outside DATA_DIR and past every size limit, bounded only by the
 *   statement timeout. In memory they count against the executor child's memory cap instead,
 *   which ends such a statement with RESOURCE_LIMIT.
 * @throws Error when trusted_schema does not read back as OFF, or temp_store as MEMORY.
 */
export function hardenConnection(db: Database): void {
  db.unsafeMode(false);
  // Set in one exec, each read back on its own: on every handle cache miss (issue 31).
  db.exec('PRAGMA trusted_schema = OFF; PRAGMA temp_store = MEMORY');
  if (db.pragma('trusted_schema', { simple: true }) !== 0) throw new Error('could not turn trusted_schema off');
  if (db.pragma('temp_store', { simple: true }) !== 2) throw new Error('could not keep temporary data in memory');
}

/**
 * The schema as a sorted list of `type:name` for every `sqlite_schema` row, plus one entry
 * `temp_schema:<rows in sqlite_temp_schema>`. The executor compares it before and after a
 * write: an object that vanished, or a trigger, virtual table or temp object that appeared,
 * means the statement did what the guard should have refused.
 */
export function schemaFingerprint(db: Database): string[] {
  const rows = db.prepare('SELECT type, name FROM main.sqlite_schema').all() as { type: string; name: string }[];
  const temp = db.prepare('SELECT count(*) FROM temp.sqlite_schema').pluck().get() as number;
  return [...rows.map((r) => `${r.type}:${r.name}`), `temp_schema:${temp}`].sort();
}
