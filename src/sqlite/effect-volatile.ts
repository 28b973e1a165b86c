import type { Database } from 'better-sqlite3';
import { isOp, isWord, skipParens } from '../guard/classifier.ts';
import { parseStatement } from '../guard/guard.ts';
import { asciiLower, isTrivia, type Token, tokenize } from '../guard/tokenizer.ts';
import { trusted } from './sqlite-trusted.ts';

/**
 * Which values an effect's digest may leave out: those made by the clock or by randomness as the
 * statement runs, which a person could not have been shown exactly. Everything else a write
 * writes is bound (see `Effect.digest`), so a value read from another table or chosen by the
 * clock (`CASE WHEN unixepoch() < …`) that differs between the preview and the run supersedes.
 */

/**
 * A DEFAULT that SQLite computes anew for each row from nothing but the clock or randomness (an
 * agent makes its tables: a default that chooses between values by the clock, through CASE or
 * arithmetic, is no such default).
 */
export function volatileDefault(dflt: string | null): boolean {
  if (dflt === null) return false;
  const lexed = tokenize(dflt);
  if (!lexed.ok || !isPure(lexed.tokens.filter((t) => !isTrivia(t)))) return false;
  return CLOCK_OR_CHANCE.test(dflt);
}

/** The clock (`CURRENT_TIMESTAMP`, `'now'`, `datetime()`) or randomness (`random()`, `randomblob(…)`) in a pure expression's text. */
const CLOCK_OR_CHANCE = /\bcurrent_(timestamp|date|time)\b|\brandom(blob)?\s*\(|'now'|\b(unixepoch|julianday|date|time|datetime)\s*\(\s*\)/i;

/**
 * An expression whose value is made as the statement runs: nothing but literals, the clock and
 * randomness, and some clock or randomness. One of literals alone is a constant, bound like data:
 * left out, `VALUES ('007')` into a table made again meanwhile with an INTEGER column stored 7
 * where the person was shown '007' (session 35, R9).
 */
function madeAsItRuns(expr: readonly Token[]): boolean {
  return isPure(expr) && CLOCK_OR_CHANCE.test(expr.map((t) => t.text).join(' '));
}

/** The columns a statement names, as {@link namedColumns} reads them. */
export interface NamedColumns {
  /** Every name it spells anywhere (identifiers, and strings, which SQLite may take for names), ASCII lower-cased. */
  spelled: Set<string>;
  /** An INSERT that sets every column: no column list, and not DEFAULT VALUES. */
  all: boolean;
  /** With `all` and VALUES: the positions every row gives a bare NULL (an INTEGER PRIMARY KEY so given is SQLite's to assign). */
  nullAt: Set<number>;
}

/** Which columns the statement names: a column it names is bound whatever its default. */
export function namedColumns(sql: string): NamedColumns {
  const parsed = parseStatement(sql);
  if ('ok' in parsed) return { spelled: new Set(), all: true, nullAt: new Set() };
  const { tokens } = parsed;
  const spelled = new Set(tokens.filter((t) => t.kind === 'word' || t.kind === 'quoted' || t.kind === 'string').map((t) => t.value.toLowerCase()));
  const into = tokens.findIndex((t) => isWord(t, 'into'));
  const all = into >= 0 && !insertHasColumnList(tokens, into) && !tokens.some((t, i) => isWord(t, 'default') && isWord(tokens[i + 1], 'values'));
  const nullAt = new Set<number>();
  // Only when a VALUES list is the whole source: `VALUES (NULL, …) UNION ALL SELECT 5, …` gives
  // the key a value in its other arm, and a VALUES inside a subquery is not the source.
  const rows = all ? valuesRows(tokens, sourceStart(tokens, into)) : undefined;
  if (rows && rows[0]!.length > 0) {
    for (let at = 0; at < rows[0]!.length; at++) {
      if (rows.every((r) => r[at]?.length === 1 && isWord(r[at]![0], 'null'))) nullAt.add(at);
    }
  }
  return { spelled, all, nullAt };
}

/** `INTO [schema.]name [AS alias] (` — the column list follows the target's name. */
function insertHasColumnList(tokens: readonly Token[], into: number): boolean {
  return isOp(tokens[afterTarget(tokens, into)], '(');
}

/** Index of the token after `INTO [schema.]name [AS alias]`. */
function afterTarget(tokens: readonly Token[], into: number): number {
  let i = into + 2;
  if (isOp(tokens[i], '.')) i += 2;
  if (isWord(tokens[i], 'as')) i += 2;
  return i;
}

/** Index of an INSERT's source (VALUES, SELECT, WITH or DEFAULT VALUES): past the target and its column list. */
function sourceStart(tokens: readonly Token[], into: number): number {
  const i = afterTarget(tokens, into);
  return isOp(tokens[i], '(') ? skipParens(tokens, i) : i;
}

/**
 * The rows of the VALUES list at `start`, each as its expressions' tokens, when that list is the
 * whole source of the insert: followed by nothing, an upsert (ON) or RETURNING. Undefined
 * otherwise — `VALUES (random()) UNION ALL SELECT v FROM src` takes its rows from data too.
 */
function valuesRows(tokens: readonly Token[], start: number): (readonly Token[])[][] | undefined {
  if (start < 0 || !isWord(tokens[start], 'values')) return undefined;
  const rows: (readonly Token[])[][] = [];
  let j = start + 1;
  for (;;) {
    if (!isOp(tokens[j], '(')) return undefined;
    const end = skipParens(tokens, j);
    if (end < 0) return undefined;
    const row: (readonly Token[])[] = [];
    for (let k = j + 1; k < end; ) {
      const stop = Math.min(exprEnd(tokens, k, []), end - 1);
      row.push(tokens.slice(k, stop));
      k = stop + 1;
    }
    rows.push(row);
    if (!isOp(tokens[end], ',')) {
      const next = tokens[end];
      return next === undefined || isWord(next, 'on', 'returning') ? rows : undefined;
    }
    j = end + 1;
  }
}

/** Functions whose result depends on nothing but their arguments, the clock and randomness. */
const PURE_FUNCTIONS = new Set(['random', 'randomblob', 'hex', 'lower', 'upper', 'datetime', 'date', 'time', 'unixepoch', 'julianday', 'strftime']);
const CLOCK_WORDS = new Set(['current_timestamp', 'current_date', 'current_time']);
/** Words that end an UPDATE's or an upsert's SET list. */
const AFTER_SET = ['from', 'where', 'returning', 'on', 'order', 'limit'];

/** The columns (ASCII lower-cased) a statement sets, everywhere, to only literals, the clock and randomness. */
export interface VolatileAssignments {
  /** In the rows it inserts: a column list whose VALUES give each such a value in every row. */
  inserted: Set<string>;
  /** In the rows it updates: an UPDATE's, or an upsert's DO UPDATE, SET. */
  updated: Set<string>;
}

/**
 * The columns (ASCII lower-cased) the statement sets, everywhere it sets them, to an expression
 * of nothing but literals, the clock and randomness — `SET token = lower(hex(randomblob(16)))`,
 * `SET updated_at = datetime('now')`, `VALUES (…, CURRENT_TIMESTAMP)` under a column list. No
 * column, parameter, operator, CASE or subquery: a value the person could not be shown exactly
 * and that no data and no condition can choose.
 *
 * Inserted and updated rows apart: an upsert's `DO UPDATE SET a = random()` says nothing of the
 * `a` its VALUES insert, which, without a column list or absent from it, is data or a DEFAULT; so
 * is a compound source's other arm (`VALUES (random()) UNION ALL SELECT v FROM src`). Both were
 * left out of the digest as random (session 35, R9).
 */
export function volatileAssignments(sql: string): VolatileAssignments {
  const updated = new Set<string>();
  const inserted = new Set<string>();
  const parsed = parseStatement(sql);
  if ('ok' in parsed) return { inserted, updated };
  const { tokens } = parsed;
  const impure = new Set<string>();
  const assign = (into: Set<string>, column: Token | undefined, expr: readonly Token[]) => {
    const name = columnName(column);
    if (name !== undefined) (madeAsItRuns(expr) ? into : impure).add(name);
  };
  tokens.forEach((t, i) => {
    if (!isWord(t, 'set')) return;
    let j = i + 1;
    while (j < tokens.length) {
      if (isOp(tokens[j], '(')) {
        // (a, b) = (…): a row value, bound whatever it holds.
        const close = skipParens(tokens, j);
        for (const c of tokens.slice(j + 1, close < 0 ? tokens.length : close - 1)) {
          const name = columnName(c);
          if (name !== undefined) impure.add(name);
        }
        j = close < 0 ? tokens.length : exprEnd(tokens, close, AFTER_SET);
      } else {
        const end = exprEnd(tokens, j + 2, AFTER_SET);
        assign(updated, tokens[j], tokens.slice(j + 2, end));
        j = end;
      }
      if (!isOp(tokens[j], ',')) break;
      j++;
    }
  });
  for (const c of impure) updated.delete(c);
  impure.clear();
  const into = tokens.findIndex((t) => isWord(t, 'into'));
  if (into >= 0 && insertHasColumnList(tokens, into)) {
    const open = afterTarget(tokens, into);
    const close = skipParens(tokens, open);
    const columns = tokens.slice(open + 1, close - 1).filter((t) => !isOp(t, ','));
    const rows = valuesRows(tokens, close);
    if (rows) {
      for (const row of rows) for (const [at, column] of columns.entries()) assign(inserted, column, row[at] ?? []);
    }
    // Without VALUES as the whole source, every listed column is bound.
    else for (const c of columns) impure.add(columnName(c) ?? c.value);
  }
  for (const c of impure) inserted.delete(c);
  return { inserted, updated };
}

/**
 * A column as a SET list or an INSERT's column list names it, ASCII lower-cased: SQLite's grammar
 * (`nm` in parse.y) takes a string literal there too, so `SET a = random(), 'a' = (SELECT v FROM
 * src)` sets `a` twice and the rightmost, the copy, is what it writes. Read as no name, the string
 * was neither random nor bound, and `a` was left out of the digest as random (session 37, R11).
 */
function columnName(t: Token | undefined): string | undefined {
  if (t?.kind === 'word' || t?.kind === 'quoted') return t.value;
  if (t?.kind === 'string') return asciiLower(t.value);
  return undefined;
}

/** Columns (ASCII lower-cased) of `table` that an ON UPDATE or ON DELETE action of its foreign keys writes. */
export function actionColumns(db: Database, table: string): Set<string> {
  const rows = trusted(
    db,
    `SELECT "from" FROM pragma_foreign_key_list(?, 'main') WHERE on_update IN ('CASCADE', 'SET NULL', 'SET DEFAULT') OR on_delete IN ('CASCADE', 'SET NULL', 'SET DEFAULT')`,
  )
    .pluck()
    .all(table) as string[];
  return new Set(rows.map(asciiLower));
}

/** A result column's expression without its alias (`expr AS name`, `expr name`). */
export function withoutAlias(expr: readonly Token[]): readonly Token[] {
  const n = expr.length;
  if (n >= 3 && isWord(expr[n - 2], 'as')) return expr.slice(0, n - 2);
  const last = expr[n - 1];
  const previous = expr[n - 2];
  const aliasLike = last?.kind === 'quoted' || (last?.kind === 'word' && !CLOCK_WORDS.has(last.value));
  const endsValue =
    previous !== undefined &&
    (isOp(previous, ')') || previous.kind === 'string' || previous.kind === 'number' || (previous.kind === 'word' && CLOCK_WORDS.has(previous.value)));
  return aliasLike && endsValue ? expr.slice(0, n - 1) : expr;
}

/** Index of the `,` or `)` (or a word of `stop`) that ends the expression starting at `i`, outside parentheses. */
export function exprEnd(tokens: readonly Token[], i: number, stop: string[]): number {
  let depth = 0;
  for (let j = i; j < tokens.length; j++) {
    const t = tokens[j];
    if (isOp(t, '(')) depth++;
    else if (isOp(t, ')')) {
      if (depth-- === 0) return j;
    } else if (depth === 0 && (isOp(t, ',') || stop.some((w) => isWord(t, w)))) return j;
  }
  return tokens.length;
}

/** An expression of nothing but literals, the clock and randomness (no column, parameter, operator, CASE or subquery). */
export function isPure(expr: readonly Token[]): boolean {
  return (
    expr.length > 0 &&
    expr.every(
      (t, i) =>
        t.kind === 'string' ||
        t.kind === 'number' ||
        isOp(t, '(') ||
        isOp(t, ')') ||
        isOp(t, ',') ||
        (t.kind === 'word' && (CLOCK_WORDS.has(t.value) || (PURE_FUNCTIONS.has(t.value) && isOp(expr[i + 1], '(')))),
    )
  );
}
