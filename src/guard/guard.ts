import { classify, isOp, type Classification, type StatementKind } from './classifier.ts';
import { INTROSPECTION_PRAGMAS, nameLengthRefusal, nameRefusal } from './names.ts';
import { alterRefusal, dropKeyword, forbiddenNameIn, longNameIn } from './rules.ts';
import { asciiLower, isTrivia, loneSurrogate, tokenize, type Token } from './tokenizer.ts';

export { INTERNAL_TABLE_PREFIX, MAX_NAME_BYTES } from './names.ts';
export type { StatementKind } from './classifier.ts';

/** The tokenizer layer's answer: the statement's kind, or a refusal with a registry code. */
export type GuardVerdict =
  | { ok: true; kind: StatementKind; ddl: boolean }
  | { ok: false; code: 'SQL_SYNTAX' | 'SQL_MULTIPLE_STATEMENTS' | 'SQL_REFUSED'; reason: string };

type Refused = Extract<GuardVerdict, { ok: false }>;

/** One statement, read off the SQL: its significant tokens and its kind. */
export interface ParsedStatement {
  readonly tokens: readonly Token[];
  readonly classification: Classification;
}

const WRITE_KINDS: ReadonlySet<StatementKind> = new Set([
  'insert',
  'replace',
  'update',
  'delete',
  'create_table',
  'create_index',
  'create_view',
  'alter_table',
]);
const DDL_KINDS: ReadonlySet<StatementKind> = new Set(['create_table', 'create_index', 'create_view', 'alter_table']);

const refuse = (reason: string): Refused => ({ ok: false, code: 'SQL_REFUSED', reason });
const syntax = (reason: string): Refused => ({ ok: false, code: 'SQL_SYNTAX', reason });

/**
 * Tokenizes `sql` and finds its one statement. Empty statements (stray `;`) are ignored, as
 * SQLite ignores them; a second non-empty statement is refused. A CREATE TRIGGER body holds
 * `;` of its own, so a trigger is kept whole and refused for what it is.
 */
export function parseStatement(sql: string): ParsedStatement | Refused {
  // Callers validate input with zod, but this is the last gate: never throw on a non-string.
  if (typeof sql !== 'string') return syntax('the SQL must be a string');
  const lexed = tokenize(sql);
  if (!lexed.ok) return syntax(lexed.reason);
  const significant = lexed.tokens.filter((t) => !isTrivia(t));
  const statements: Token[][] = [[]];
  for (const t of significant) {
    if (t.kind === 'semicolon') statements.push([]);
    else statements[statements.length - 1]!.push(t);
  }
  const nonEmpty = statements.filter((s) => s.length > 0);
  if (nonEmpty.length === 0) return syntax('the SQL holds no statement (only whitespace, comments or ;)');
  const first = nonEmpty[0]!;
  const classification = classify(first);
  if (classification.kind === 'create_trigger') return { tokens: first, classification };
  if (nonEmpty.length > 1) {
    const second = nonEmpty[1]![0]!;
    return {
      ok: false,
      code: 'SQL_MULTIPLE_STATEMENTS',
      reason: `a second statement starts at offset ${second.offset} (${JSON.stringify(second.text)}); send one statement per call`,
    };
  }
  return { tokens: first, classification };
}

/** Refusals that hold for every tool, by the statement's kind. */
function kindRefusal(c: Classification): Refused | undefined {
  switch (c.kind) {
    case 'unknown':
      return syntax(c.problem ?? 'not a statement SQLite knows');
    case 'pragma':
      return refuse('PRAGMA is not allowed: use DATA_DESCRIBE_SCHEMA to see tables, columns and indexes');
    case 'attach':
    case 'detach':
      return refuse(`${c.kind.toUpperCase()} is not allowed: each call works on its own database only`);
    case 'vacuum':
    case 'analyze':
    case 'reindex':
      return refuse(`${c.kind.toUpperCase()} is not allowed: agentdb maintains the database file itself`);
    case 'begin':
    case 'commit':
    case 'rollback':
    case 'savepoint':
    case 'release':
      return refuse('transaction control (BEGIN, COMMIT, END, ROLLBACK, SAVEPOINT, RELEASE) is not allowed: every call runs in its own transaction');
    case 'explain':
      return refuse('EXPLAIN is not allowed: run the statement itself');
    case 'create_trigger':
      return refuse('triggers are not allowed: do the work in the statements you send');
    case 'create_virtual_table':
      return refuse('virtual tables are not allowed: create a regular table with CREATE TABLE');
  }
  if (c.temp) return refuse('temporary objects (CREATE TEMP/TEMPORARY) are not allowed: create a regular table instead');
  return undefined;
}

function label(kind: StatementKind): string {
  return kind.replace('_', ' ').toUpperCase();
}

/**
 * Layer 1 for DATA_QUERY_SQL: exactly one SELECT, WITH … SELECT or VALUES that names nothing
 * of the engine's, agentdb's, PRAGMA's or the temp schema's.
 */
export function guardQuery(sql: string): GuardVerdict {
  const parsed = parseStatement(sql);
  if ('ok' in parsed) return parsed;
  const { classification: c, tokens } = parsed;
  const byKind = kindRefusal(c);
  if (byKind) return byKind;
  if (c.kind === 'drop') return refuse('DATA_QUERY_SQL takes one SELECT; use DATA_DROP_TABLE to drop a table or view');
  if (c.kind !== 'select') return refuse(`DATA_QUERY_SQL takes one SELECT; use DATA_WRITE_SQL for ${label(c.kind)}`);
  const name = forbiddenNameIn(tokens) ?? longNameIn(tokens);
  if (name) return refuse(name);
  return { ok: true, kind: 'select', ddl: false };
}

/**
 * Layer 1 for DATA_WRITE_SQL: exactly one INSERT, REPLACE, UPDATE or DELETE (a WITH clause
 * may precede them; RETURNING is fine), CREATE TABLE/INDEX/VIEW, or ALTER TABLE that renames
 * or adds a column. No DROP anywhere, nothing temporary, no forbidden names.
 */
export function guardWrite(sql: string): GuardVerdict {
  const parsed = parseStatement(sql);
  if ('ok' in parsed) return parsed;
  const { classification: c, tokens } = parsed;
  const byKind = kindRefusal(c);
  if (byKind) return byKind;
  if (c.kind === 'select') {
    return refuse('DATA_WRITE_SQL takes one INSERT, REPLACE, UPDATE, DELETE, CREATE TABLE/INDEX/VIEW or ALTER TABLE; use DATA_QUERY_SQL for SELECT');
  }
  if (c.kind === 'drop' || dropKeyword(tokens) >= 0) {
    return refuse('DROP is not allowed in DATA_WRITE_SQL (nor ALTER TABLE … DROP COLUMN): use DATA_DROP_TABLE to drop a table or view');
  }
  if (!WRITE_KINDS.has(c.kind)) return refuse(`${label(c.kind)} is not allowed in DATA_WRITE_SQL`);
  if (c.verb > 0 && DDL_KINDS.has(c.kind)) return syntax(`a WITH clause cannot precede ${label(c.kind)}`);
  const alter = c.kind === 'alter_table' ? alterRefusal(tokens, c.verb) : undefined;
  if (alter) return refuse(alter);
  const name = forbiddenNameIn(tokens) ?? longNameIn(tokens);
  if (name) return refuse(name);
  return { ok: true, kind: c.kind, ddl: DDL_KINDS.has(c.kind) };
}

/**
 * Layer 1 for `db_query`: what guardQuery allows, plus the read-only introspection PRAGMAs,
 * written `PRAGMA [main.]name` or `PRAGMA [main.]name(arg)` — never `= value`, never another
 * schema, never an argument naming the engine's or agentdb's tables.
 */
export function guardIntrospection(sql: string): GuardVerdict {
  const parsed = parseStatement(sql);
  if ('ok' in parsed) return parsed;
  if (parsed.classification.kind !== 'pragma') return guardQuery(sql);
  const t = parsed.tokens;
  let i = 1;
  if (isOp(t[i + 1], '.')) {
    if (!isNameToken(t[i]) || asciiLower(t[i]!.value) !== 'main')
      return refuse('introspection PRAGMAs read the main schema only: write PRAGMA name or PRAGMA main.name');
    i += 2;
  }
  const name = t[i];
  const allowed = [...INTROSPECTION_PRAGMAS].join(', ');
  if (!isNameToken(name) || !INTROSPECTION_PRAGMAS.has(asciiLower(name!.value))) {
    return refuse(`this PRAGMA is not allowed; db_query runs only ${allowed} (or use db_schema)`);
  }
  i++;
  if (i < t.length) {
    const arg = t[i + 1];
    const shaped = isOp(t[i], '(') && arg !== undefined && (isNameToken(arg) || arg.kind === 'number') && isOp(t[i + 2], ')') && i + 3 === t.length;
    if (!shaped) return refuse(`write PRAGMA ${name!.value} or PRAGMA ${name!.value}(name); setting a PRAGMA (= value) is not allowed`);
    const argRefusal = arg.kind === 'number' ? undefined : (nameRefusal(arg.value, { tableSlot: true, call: false }) ?? nameLengthRefusal(arg.value));
    if (argRefusal) return refuse(argRefusal);
  }
  return { ok: true, kind: 'pragma', ddl: false };
}

function isNameToken(t: Token | undefined): boolean {
  return t !== undefined && (t.kind === 'word' || t.kind === 'quoted' || t.kind === 'string');
}

/**
 * Layer 1 for DATA_DROP_TABLE's `table` argument, a bare name (the store quotes it): refuses
 * the engine's tables (`sqlite_*`), agentdb's (`_agentdb_*`), PRAGMA and page tables, and
 * names SQLite could not hold.
 */
export function guardTableName(name: string): GuardVerdict {
  if (typeof name !== 'string' || name.length === 0) return refuse('name the table or view to drop');
  if (name.includes('\u0000')) return refuse('a table name cannot contain a NUL character');
  if (loneSurrogate(name) >= 0) return refuse('a table name must be valid Unicode (it holds a lone UTF-16 surrogate)');
  // No length check here: a table named before names were held to MAX_NAME_BYTES must stay
  // droppable (the contract caps this argument at 256 characters).
  const reason = nameRefusal(name, { tableSlot: true, call: false });
  if (reason) return refuse(reason);
  return { ok: true, kind: 'drop', ddl: true };
}
