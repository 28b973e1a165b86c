import { isOp, isWord, skipParens } from './classifier.ts';
import { MAX_NAME_BYTES, nameLengthRefusal, nameRefusal } from './names.ts';
import { asciiLower, type Token } from './tokenizer.ts';

/**
 * Keywords after which SQLite's grammar reads a table, view or index name (`nm` in parse.y,
 * which accepts a string literal as well as an identifier): `FROM 'sqlite_master'` and
 * `INSERT INTO 'x'` are tables, `x IN 'sqlite_master'` is a subquery. ON covers
 * `CREATE INDEX … ON t` (outside a FROM list only); TO covers `RENAME TO`.
 */
const BEFORE_TABLE = new Set(['from', 'join', 'into', 'update', 'table', 'exists', 'on', 'references', 'index', 'view', 'in', 'to']);

/** Conflict clauses that may sit between UPDATE OR and the table name. */
const CONFLICT = new Set(['replace', 'ignore', 'abort', 'fail', 'rollback']);

/** Clause keywords that end a FROM list at their own parenthesis depth. */
const ENDS_FROM = new Set([
  'where',
  'group',
  'having',
  'window',
  'order',
  'limit',
  'union',
  'except',
  'intersect',
  'returning',
  'select',
  'values',
  'set',
  'do',
]);

/**
 * Where each token sits: whether the grammar around it makes it a table slot. A FROM list
 * runs, per parenthesis depth, from FROM (or JOIN) to the next clause keyword at that depth;
 * ON … keeps it open, because `FROM a JOIN b ON x = y, c` lists `c` as a table. A `(` opened
 * in a table slot (`FROM (t)`, `FROM (SELECT …)`) starts a nested FROM list until its SELECT.
 */
export function tableSlots(tokens: readonly Token[]): boolean[] {
  const inFrom: boolean[] = [false];
  const slots: boolean[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    const prev = tokens[i - 1];
    const top = inFrom[inFrom.length - 1]!;
    slots.push(contextSlot(tokens, i, top));
    if (isOp(t, '(')) {
      inFrom.push(top && (isWord(prev, 'from', 'join') || isOp(prev, ',') || isOp(prev, '(')));
    } else if (isOp(t, ')')) {
      if (inFrom.length > 1) inFrom.pop();
    } else if (isWord(t, 'join') || (isWord(t, 'from') && !isDistinctFrom(tokens, i))) {
      inFrom[inFrom.length - 1] = true;
    } else if (t.kind === 'word' && ENDS_FROM.has(t.value)) {
      inFrom[inFrom.length - 1] = false;
    }
  }
  return slots;
}

/**
 * Whether the FROM at `i` is the one of the `IS [NOT] DISTINCT FROM` operator. Neither IS nor
 * DISTINCT can be an identifier in SQLite, so these words always spell the operator.
 */
function isDistinctFrom(tokens: readonly Token[], i: number): boolean {
  if (!isWord(tokens[i - 1], 'distinct')) return false;
  return isWord(tokens[i - 2], 'is') || (isWord(tokens[i - 2], 'not') && isWord(tokens[i - 3], 'is'));
}

/** A table slot judged by what comes before the token, not by a following dot. */
function contextSlot(tokens: readonly Token[], i: number, inFrom: boolean): boolean {
  const prev = tokens[i - 1];
  const before = tokens[i - 2];
  if (prev === undefined) return false;
  if (prev.kind === 'word') {
    // `x IS [NOT] DISTINCT FROM 'sqlite_x'` compares with a value; no list of tables follows.
    if (prev.value === 'from' && isDistinctFrom(tokens, i - 1)) return false;
    // ON names a table in CREATE INDEX … ON t; in a join's ON clause it starts an expression.
    if (prev.value === 'on') return !inFrom;
    if (BEFORE_TABLE.has(prev.value)) return true;
    if (CONFLICT.has(prev.value) && isWord(before, 'or') && isWord(tokens[i - 3], 'update')) return true;
    if (prev.value === 'by' && isWord(before, 'indexed')) return true;
    return false;
  }
  return inFrom && (isOp(prev, ',') || isOp(prev, '('));
}

/** Could this token name an object? Identifiers always; string literals only in table slots. */
function nameLike(token: Token): boolean {
  return token.kind === 'word' || token.kind === 'quoted' || token.kind === 'string';
}

/**
 * The first forbidden name in one statement's tokens, as a refusal reason. Identifiers are
 * judged wherever they appear (a column cannot be called `sqlite_master` either); string
 * literals only where SQLite would read them as a name, so `SELECT 'sqlite_master'` stays a
 * plain value.
 */
export function forbiddenNameIn(tokens: readonly Token[]): string | undefined {
  const slots = tableSlots(tokens);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (!nameLike(t)) continue;
    const prev = tokens[i - 1];
    const next = tokens[i + 1];
    const dotted = isOp(prev, '.') || isOp(next, '.');
    const tableSlot = slots[i]! || dotted;
    if (t.kind === 'string' && !tableSlot && !isOp(next, '(')) continue;
    const reason = nameRefusal(t.value, { tableSlot, call: isOp(next, '(') });
    if (reason) return reason;
    const schema = asciiLower(t.value);
    if ((schema === 'temp' || schema === 'temporary') && isOp(next, '.') && (slots[i] || isOp(tokens[i + 3], '.'))) {
      return 'the temp schema is not allowed: temporary objects do not outlive the call; create a regular table with DATA_WRITE_SQL';
    }
  }
  return undefined;
}

/**
 * The first name in one statement's tokens longer than `MAX_NAME_BYTES`, as a refusal reason.
 * Identifiers are judged wherever they appear; string literals where SQLite reads them as a
 * name: in a table slot and after AS (`SELECT 1 AS 'label'`). Other names a string can give (a
 * column in `CREATE TABLE t('c' INT)`, or a view column named by its expression) are judged by
 * the store on the schema a write leaves, and results cut long column names in any case.
 */
export function longNameIn(tokens: readonly Token[]): string | undefined {
  let slots: boolean[] | undefined;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t.kind !== 'word' && t.kind !== 'quoted' && t.kind !== 'string') continue;
    if (t.kind === 'string') {
      // Long string literals are common values (and measuring 100 KB of one is not free): only
      // their place decides whether they name something.
      if (t.value.length * 3 <= MAX_NAME_BYTES) continue;
      slots ??= tableSlots(tokens);
      if (!slots[i] && !isWord(tokens[i - 1], 'as') && !isOp(tokens[i - 1], '.') && !isOp(tokens[i + 1], '.')) continue;
    }
    const reason = nameLengthRefusal(t.value);
    if (reason) return reason;
  }
  return undefined;
}

/** Index of the first bare DROP keyword (DROP TABLE, ALTER TABLE … DROP COLUMN), or -1. */
export function dropKeyword(tokens: readonly Token[]): number {
  return tokens.findIndex((t) => isWord(t, 'drop'));
}

/**
 * Why an ALTER TABLE is not one of the three agents may run (RENAME TO, RENAME [COLUMN],
 * ADD [COLUMN]), or undefined. SQLite 3.53 also knows ADD CHECK, ADD CONSTRAINT and
 * ALTER COLUMN … SET/DROP NOT NULL; they are not part of the tool.
 */
export function alterRefusal(tokens: readonly Token[], verb: number): string | undefined {
  if (!isWord(tokens[verb + 1], 'table')) return 'write ALTER TABLE name …';
  let i = verb + 3; // past ALTER TABLE name
  if (isOp(tokens[i], '.')) i += 2; // schema.name
  const action = tokens[i];
  const next = tokens[i + 1];
  const allowed = 'ALTER TABLE takes RENAME TO, RENAME COLUMN or ADD COLUMN';
  if (isWord(action, 'rename')) return undefined;
  if (isWord(action, 'add') && !isWord(next, 'constraint', 'check')) return undefined;
  return `${allowed}; to change a column's constraints, create a new table and copy the rows`;
}

/**
 * Index of the first token of a CREATE VIEW's SELECT — `CREATE [TEMP] VIEW [IF NOT EXISTS]
 * [schema.]name [(columns)] AS select` — or -1 when the tokens do not have that shape.
 */
export function viewBodyStart(tokens: readonly Token[], verb: number): number {
  let i = verb + 1;
  while (isWord(tokens[i], 'temp', 'temporary')) i++;
  if (!isWord(tokens[i], 'view')) return -1;
  i++;
  if (isWord(tokens[i], 'if') && isWord(tokens[i + 1], 'not') && isWord(tokens[i + 2], 'exists')) i += 3;
  i++; // the name
  if (isOp(tokens[i], '.')) i += 2;
  if (isOp(tokens[i], '(')) i = skipParens(tokens, i);
  if (i < 0 || !isWord(tokens[i], 'as') || tokens[i + 1] === undefined) return -1;
  return i + 1;
}
