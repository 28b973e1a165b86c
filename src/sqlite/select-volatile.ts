import type { Database } from 'better-sqlite3';
import { isOp, isWord, skipParens } from '../guard/classifier.ts';
import { parseStatement } from '../guard/guard.ts';
import { asciiLower, type Token } from '../guard/tokenizer.ts';
import { exprEnd, isPure, withoutAlias } from './effect-volatile.ts';

// Which result columns of a CREATE TABLE … AS SELECT no data chose: an expression of only
// literals, the clock and randomness (`random() AS r`), or a column read by its name from a CTE
// or a subquery in FROM whose column is such an expression (`WITH r AS (SELECT random() x)
// SELECT x FROM r`, `SELECT * FROM (SELECT randomblob(4))`), in every arm of a compound. Their
// values are left out of a CTAS's digest, as a write's SET of them is (session 32, R6; through
// CTEs and subqueries session 33, R7): bound, they differed at every run and the approval was
// asked again each time. Anything not so proven stays bound. Two readers of one statement must
// agree before a column is let go: the tokens (below), and SQLite itself, which names the table
// column any result column comes from through every CTE and subquery (column metadata): a
// column SQLite traces to a table's column is bound whatever the tokens said.

/** A SELECT's result columns: names (lower-cased; undefined when SQLite names it by its text) and which no data chose. */
interface Shape {
  names: (string | undefined)[];
  volatile: boolean[];
}

/** What a CTE name stands for where it is visible; null while its own body is read (a recursive reference proves nothing). */
type Scope = ReadonlyMap<string, Shape | null>;

/** The columns `SELECT *` gives of a table or view of the main schema, lower-cased, or undefined when there is none. */
export type ColumnsOf = (table: string) => string[] | undefined;

/** A SELECT's parts, as token ranges: the WITH clause, and each arm of the compound (no ORDER BY or LIMIT of the whole). */
interface Parts {
  withEnd: number;
  arms: [number, number][];
}

const COMPOUND = ['union', 'intersect', 'except'];
const SELECT_END = ['order', 'limit'];
const AFTER_RESULTS = ['from', 'where', 'group', 'having', 'window', 'order', 'limit', 'union', 'intersect', 'except'];
const AFTER_FROM = ['where', 'group', 'having', 'window', 'order', 'limit', 'union', 'intersect', 'except'];
const JOIN_WORDS = ['join', 'left', 'right', 'full', 'inner', 'cross', 'outer'];
/** Words after a FROM item that are not its alias. */
const NOT_ALIAS = new Set([...AFTER_FROM, ...JOIN_WORDS, 'natural', 'on', 'using', 'indexed', 'not']);

/**
 * The positions (0-based) of a CTAS's result columns that no data chose, as the tokens tell and
 * SQLite agrees (see the file's comment). Empty for anything else.
 */
export function volatileCreatedColumns(db: Database, sql: string): Set<number> {
  const parsed = parseStatement(sql);
  if ('ok' in parsed) return new Set();
  const tokens = parsed.tokens;
  const as = tokens.findIndex((t, i) => isWord(t, 'as') && i > 0);
  if (as < 0) return new Set();
  const select = tokens.slice(as + 1);
  const columnsOf: ColumnsOf = (table) => {
    const rows = db.prepare(`SELECT name FROM pragma_table_xinfo(?, 'main') WHERE hidden <> 1 ORDER BY cid`).pluck().all(table) as string[];
    return rows.length === 0 ? undefined : rows.map(asciiLower);
  };
  const shape = selectShape(select, 0, select.length, new Map(), columnsOf);
  const parts = splitSelect(select, 0, select.length);
  if (shape === undefined || parts === undefined) return new Set();
  const found = new Set(shape.volatile.flatMap((v, at) => (v ? [at] : [])));
  if (found.size === 0) return found;
  // SQLite's reading: each arm on its own (column metadata is the first arm's), under the WITH clause.
  const text = (from: number, to: number) => sql.slice(select[from]!.offset, to < select.length ? select[to]!.offset : sql.length);
  const withText = parts.withEnd > 0 ? text(0, parts.withEnd) : '';
  for (const [from, to] of parts.arms) {
    let origins: (string | null)[];
    try {
      origins = db
        .prepare(`${withText} ${text(from, to)}`)
        .columns()
        .map((c) => c.table);
    } catch {
      return new Set();
    }
    for (const at of found) if (origins[at] !== null) found.delete(at);
  }
  return found;
}

/** The tokens' reading of the SELECT in `[from, to)`: its shape, or undefined when not understood. */
function selectShape(tokens: readonly Token[], from: number, to: number, outer: Scope, columnsOf: ColumnsOf): Shape | undefined {
  const parts = splitSelect(tokens, from, to);
  if (parts === undefined) return undefined;
  const scope = new Map(outer);
  if (parts.withEnd > from) {
    let i = from + 1;
    if (isWord(tokens[i], 'recursive')) i++;
    while (i < parts.withEnd) {
      const name = tokens[i]!;
      const key = asciiLower(name.value);
      let columns: string[] | undefined;
      i++;
      if (isOp(tokens[i], '(')) {
        const close = skipParens(tokens, i);
        columns = tokens.slice(i + 1, close - 1).flatMap((t) => (isOp(t, ',') ? [] : [asciiLower(t.value)]));
        i = close;
      }
      i++; // AS
      if (isWord(tokens[i], 'not')) i++;
      if (isWord(tokens[i], 'materialized')) i++;
      const close = skipParens(tokens, i);
      scope.set(key, null);
      const body = name.kind === 'string' ? undefined : selectShape(tokens, i + 1, close - 1, scope, columnsOf);
      scope.set(key, body && columns ? (columns.length === body.names.length ? { names: columns, volatile: body.volatile } : null) : (body ?? null));
      i = close + 1; // past `,`
    }
  }
  let shape: Shape | undefined;
  for (const [a, b] of parts.arms) {
    const arm = isWord(tokens[a], 'values') ? valuesShape(tokens, a, b) : armShape(tokens, a, b, scope, columnsOf);
    if (arm === undefined || (shape !== undefined && arm.volatile.length !== shape.volatile.length)) return undefined;
    shape = shape === undefined ? arm : { names: shape.names, volatile: shape.volatile.map((v, at) => v && arm.volatile[at]!) };
  }
  return shape;
}

/** Where a SELECT's WITH clause ends and each arm of its compound lies; undefined when unbalanced. */
function splitSelect(tokens: readonly Token[], from: number, to: number): Parts | undefined {
  let i = from;
  if (isWord(tokens[i], 'with')) {
    i++;
    if (isWord(tokens[i], 'recursive')) i++;
    for (;;) {
      i++;
      if (isOp(tokens[i], '(')) i = skipParens(tokens, i);
      if (i < 0 || !isWord(tokens[i], 'as')) return undefined;
      i++;
      if (isWord(tokens[i], 'not')) i++;
      if (isWord(tokens[i], 'materialized')) i++;
      if (!isOp(tokens[i], '(')) return undefined;
      i = skipParens(tokens, i);
      if (i < 0 || i > to) return undefined;
      if (!isOp(tokens[i], ',')) break;
      i++;
    }
  }
  const withEnd = i;
  const arms: [number, number][] = [];
  let start = i;
  let depth = 0;
  for (; i < to; i++) {
    const t = tokens[i];
    if (isOp(t, '(')) depth++;
    else if (isOp(t, ')')) depth--;
    if (depth !== 0 || t?.kind !== 'word') continue;
    if (COMPOUND.includes(t.value)) {
      arms.push([start, i]);
      start = isWord(tokens[i + 1], 'all') ? i + 2 : i + 1;
    } else if (SELECT_END.includes(t.value)) break;
  }
  arms.push([start, i]);
  return arms.every(([a, b]) => b > a) ? { withEnd, arms } : undefined;
}

/** VALUES (…), (…): a position is volatile when every row gives it such an expression. */
function valuesShape(tokens: readonly Token[], from: number, to: number): Shape | undefined {
  let volatile: boolean[] | undefined;
  let j = from + 1;
  while (j < to && isOp(tokens[j], '(')) {
    const end = skipParens(tokens, j);
    if (end < 0 || end > to) return undefined;
    const row: boolean[] = [];
    for (let k = j + 1; k < end; ) {
      const stop = Math.min(exprEnd(tokens, k, []), end - 1);
      row.push(isPure(tokens.slice(k, stop)));
      k = stop + 1;
    }
    if (volatile !== undefined && volatile.length !== row.length) return undefined;
    volatile = volatile === undefined ? row : volatile.map((v, at) => v && row[at]!);
    j = isOp(tokens[end], ',') ? end + 1 : to;
  }
  return volatile && { names: volatile.map((_, at) => `column${at + 1}`), volatile };
}

/** A FROM item: the name it is known by (undefined for an unaliased subquery) and its columns. */
interface Source {
  exposed: string | undefined;
  shape: Shape | undefined;
  /** A table or view: it also answers to the rowid's names. */
  table: boolean;
}

const ROWID_NAMES = ['rowid', 'oid', '_rowid_'];

/** One `SELECT … [FROM …]` arm. */
function armShape(tokens: readonly Token[], from: number, to: number, scope: Scope, columnsOf: ColumnsOf): Shape | undefined {
  if (!isWord(tokens[from], 'select')) return undefined;
  let k = from + 1;
  if (isWord(tokens[k], 'distinct', 'all')) k++;
  const results: (readonly Token[])[] = [];
  for (;;) {
    const end = Math.min(exprEnd(tokens, k, AFTER_RESULTS), to);
    results.push(tokens.slice(k, end));
    if (!isOp(tokens[end], ',') || end >= to) {
      k = end;
      break;
    }
    k = end + 1;
  }
  const sources = isWord(tokens[k], 'from') ? fromSources(tokens, k + 1, to, scope, columnsOf) : [];
  if (sources === undefined) return undefined;
  const shape: Shape = { names: [], volatile: [] };
  for (const item of results) {
    const star = starColumns(item, sources);
    if (star !== null) {
      if (star === undefined) return undefined;
      shape.names.push(...star.names);
      shape.volatile.push(...star.volatile);
      continue;
    }
    const expr = withoutAlias(item);
    const alias = expr.length < item.length ? asciiLower(item[item.length - 1]!.value) : undefined;
    const column = columnRef(expr, sources);
    shape.names.push(alias ?? column?.name);
    shape.volatile.push(isPure(expr) || column?.volatile === true);
  }
  return shape;
}

/** `*` or `name.*`: the columns it stands for (undefined when not known), or null when the item is no star. */
function starColumns(item: readonly Token[], sources: Source[]): Shape | undefined | null {
  const whole = item.length === 1 && isOp(item[0], '*');
  const of = item.length === 3 && isOp(item[1], '.') && isOp(item[2], '*') ? asciiLower(item[0]!.value) : undefined;
  if (!whole && of === undefined) return null;
  const chosen = whole ? sources : sources.filter((s) => s.exposed === of);
  if (chosen.length === 0 || chosen.some((s) => s.shape === undefined)) return undefined;
  return { names: chosen.flatMap((s) => s.shape!.names), volatile: chosen.flatMap((s) => s.shape!.volatile) };
}

/** A bare column reference (`x`, `r.x`) that exactly one source gives by name: its name and whether it is volatile. */
function columnRef(expr: readonly Token[], sources: Source[]): { name: string; volatile: boolean } | undefined {
  const named = (t: Token | undefined) => t !== undefined && (t.kind === 'word' || t.kind === 'quoted');
  let of: string | undefined;
  let name: string;
  if (expr.length === 1 && named(expr[0])) name = expr[0]!.value;
  else if (expr.length === 3 && named(expr[0]) && isOp(expr[1], '.') && named(expr[2])) {
    of = expr[0]!.value;
    name = expr[2]!.value;
  } else return undefined;
  const candidates = of === undefined ? sources : sources.filter((s) => s.exposed === of);
  // Every candidate's names must be known, or the name could come from one of them.
  if (candidates.some((s) => s.shape === undefined || s.shape.names.includes(undefined))) return { name, volatile: false };
  const hits = candidates.flatMap((s) => [
    ...s.shape!.names.flatMap((n, at) => (n === name ? [s.shape!.volatile[at]!] : [])),
    ...(s.table && ROWID_NAMES.includes(name) ? [false] : []),
  ]);
  return { name, volatile: hits.length === 1 && hits[0]! };
}

/**
 * The FROM list in `[from, to)` up to WHERE and the rest: tables and views of the main schema
 * (by `columnsOf`, with the rowid's names), CTEs in scope, subqueries. A table-valued function,
 * a parenthesised join, or NATURAL/USING (whose `*` merges columns) make it not understood.
 */
function fromSources(tokens: readonly Token[], from: number, to: number, scope: Scope, columnsOf: ColumnsOf): Source[] | undefined {
  const sources: Source[] = [];
  let i = from;
  while (i < to && !(tokens[i]?.kind === 'word' && AFTER_FROM.includes(tokens[i]!.value))) {
    const t = tokens[i]!;
    let source: Source;
    if (isOp(t, '(')) {
      const close = skipParens(tokens, i);
      if (close < 0 || !isWord(tokens[i + 1], 'select', 'with', 'values')) return undefined;
      source = { exposed: undefined, shape: selectShape(tokens, i + 1, close - 1, scope, columnsOf), table: false };
      i = close;
    } else if (t.kind === 'word' || t.kind === 'quoted') {
      const qualified = isOp(tokens[i + 1], '.');
      const name = qualified ? tokens[i + 2]! : t;
      i += qualified ? 3 : 1;
      if (isOp(tokens[i], '(')) return undefined;
      const cte = qualified ? undefined : scope.get(name.value);
      let shape: Shape | undefined;
      if (cte !== undefined) shape = cte ?? undefined;
      else if (!qualified || t.value === 'main') {
        const columns = columnsOf(name.value);
        shape = columns && { names: columns, volatile: columns.map(() => false) };
      }
      source = { exposed: name.value, shape, table: cte === undefined };
    } else return undefined;
    if (isWord(tokens[i], 'as')) i++;
    const alias = tokens[i];
    if (alias !== undefined && (alias.kind === 'quoted' || alias.kind === 'string' || (alias.kind === 'word' && !NOT_ALIAS.has(alias.value)))) {
      source.exposed = asciiLower(alias.value);
      i++;
    }
    sources.push(source);
    // Up to the next item: INDEXED BY / NOT INDEXED, ON's condition; a comma or JOIN starts the next.
    let depth = 0;
    for (; i < to; i++) {
      const u = tokens[i]!;
      if (isOp(u, '(')) depth++;
      else if (isOp(u, ')')) depth--;
      if (depth !== 0) continue;
      if (isWord(u, 'natural', 'using')) return undefined;
      if (isOp(u, ',') || isWord(u, ...JOIN_WORDS) || (u.kind === 'word' && AFTER_FROM.includes(u.value))) break;
    }
    while (i < to && (isOp(tokens[i], ',') || isWord(tokens[i], ...JOIN_WORDS))) i++;
  }
  return sources;
}
