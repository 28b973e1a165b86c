import type { Token } from './tokenizer.ts';

/**
 * What one statement is. The first nine are the statements agents may run (through one tool
 * or another); the rest exist so a refusal can name what it refused.
 */
export type StatementKind =
  | 'select'
  | 'insert'
  | 'replace'
  | 'update'
  | 'delete'
  | 'create_table'
  | 'create_index'
  | 'create_view'
  | 'alter_table'
  | 'create_trigger'
  | 'create_virtual_table'
  | 'drop'
  | 'pragma'
  | 'attach'
  | 'detach'
  | 'vacuum'
  | 'analyze'
  | 'reindex'
  | 'begin'
  | 'commit'
  | 'rollback'
  | 'savepoint'
  | 'release'
  | 'explain'
  | 'unknown';

/** A statement's kind and the facts the rules need beside it. */
export interface Classification {
  readonly kind: StatementKind;
  /** `CREATE TEMP …` / `CREATE TEMPORARY …`. */
  readonly temp: boolean;
  /** Index of the token that decided the kind (after any WITH clause). */
  readonly verb: number;
  /** Set when the kind is `unknown`: why no kind could be read off the tokens. */
  readonly problem?: string;
}

const FIRST_WORD: Record<string, StatementKind> = {
  select: 'select',
  values: 'select',
  insert: 'insert',
  replace: 'replace',
  update: 'update',
  delete: 'delete',
  alter: 'alter_table',
  drop: 'drop',
  pragma: 'pragma',
  attach: 'attach',
  detach: 'detach',
  vacuum: 'vacuum',
  analyze: 'analyze',
  reindex: 'reindex',
  begin: 'begin',
  commit: 'commit',
  end: 'commit',
  rollback: 'rollback',
  savepoint: 'savepoint',
  release: 'release',
  explain: 'explain',
};

/** A bare keyword. Quoted text never counts: `"select"` is a name, not a statement. */
export function isWord(token: Token | undefined, ...words: string[]): boolean {
  return token !== undefined && token.kind === 'word' && words.includes(token.value);
}

/** True for `(` / `)` / `,` / `.` and other operators given by text. */
export function isOp(token: Token | undefined, text: string): boolean {
  return token !== undefined && token.kind === 'operator' && token.text === text;
}

/**
 * Index just past the `)` that closes the `(` at `open`, or -1 when it is never closed.
 */
export function skipParens(tokens: readonly Token[], open: number): number {
  let depth = 0;
  for (let i = open; i < tokens.length; i++) {
    if (isOp(tokens[i], '(')) depth++;
    else if (isOp(tokens[i], ')') && --depth === 0) return i + 1;
  }
  return -1;
}

/**
 * Classifies one statement from its significant tokens (no whitespace, comments or `;`).
 * A WITH clause is skipped CTE by CTE — `name [(columns)] AS [NOT] [MATERIALIZED] (body)` —
 * and the statement is whatever follows the list, as SQLite's grammar has it.
 */
export function classify(tokens: readonly Token[]): Classification {
  let verb = 0;
  if (isWord(tokens[0], 'with')) {
    const after = skipWith(tokens);
    if (typeof after === 'string') return { kind: 'unknown', temp: false, verb: 0, problem: after };
    verb = after;
  }
  const first = tokens[verb];
  if (first === undefined) return { kind: 'unknown', temp: false, verb, problem: 'the WITH clause is not followed by a statement' };
  if (isWord(first, 'create')) return classifyCreate(tokens, verb);
  const kind = first.kind === 'word' ? FIRST_WORD[first.value] : undefined;
  if (kind === undefined) {
    return { kind: 'unknown', temp: false, verb, problem: `a statement cannot start with ${JSON.stringify(first.text)}` };
  }
  return { kind, temp: false, verb };
}

function classifyCreate(tokens: readonly Token[], verb: number): Classification {
  let i = verb + 1;
  let temp = false;
  while (isWord(tokens[i], 'temp', 'temporary', 'unique')) {
    if (!isWord(tokens[i], 'unique')) temp = true;
    i++;
  }
  const what = tokens[i];
  const kinds: Record<string, StatementKind> = {
    table: 'create_table',
    index: 'create_index',
    view: 'create_view',
    trigger: 'create_trigger',
    virtual: 'create_virtual_table',
  };
  const kind = what?.kind === 'word' ? kinds[what.value] : undefined;
  if (kind === undefined) {
    return { kind: 'unknown', temp, verb, problem: 'CREATE must be followed by TABLE, INDEX, VIEW, TRIGGER or VIRTUAL TABLE' };
  }
  return { kind, temp, verb };
}

/** Index of the statement after the CTE list, or why the WITH clause could not be read. */
function skipWith(tokens: readonly Token[]): number | string {
  let i = 1;
  if (isWord(tokens[i], 'recursive')) i++;
  for (;;) {
    const name = tokens[i];
    if (name === undefined || !(name.kind === 'word' || name.kind === 'quoted' || name.kind === 'string')) {
      return 'WITH must be followed by a common table expression name';
    }
    i++;
    if (isOp(tokens[i], '(')) {
      i = skipParens(tokens, i);
      if (i < 0) return 'unbalanced parentheses in the WITH clause';
    }
    if (!isWord(tokens[i], 'as')) return `expected AS after ${name.text} in the WITH clause`;
    i++;
    if (isWord(tokens[i], 'not')) i++;
    if (isWord(tokens[i], 'materialized')) i++;
    if (!isOp(tokens[i], '(')) return `expected ( after AS in the WITH clause`;
    i = skipParens(tokens, i);
    if (i < 0) return 'unbalanced parentheses in the WITH clause';
    if (!isOp(tokens[i], ',')) return i;
    i++;
  }
}
