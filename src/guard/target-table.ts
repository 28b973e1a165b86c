import { isOp, isWord } from './classifier.ts';
import { parseStatement } from './guard.ts';
import type { Token } from './tokenizer.ts';

/** A name token as SQLite reads it, case kept: quotes stripped and inner quotes undoubled. */
function nameOf(t: Token | undefined): string | undefined {
  if (!t) return undefined;
  if (t.kind === 'word') return t.text;
  if (t.kind !== 'quoted') return undefined;
  const q = t.text[0]!;
  const close = q === '[' ? ']' : q;
  return t.text.slice(1, -1).replaceAll(close + close, close);
}

/** The (possibly `schema.`-qualified) name starting at `i`: the object's own name. */
function qualifiedName(tokens: readonly Token[], i: number): string | undefined {
  if (isOp(tokens[i + 1], '.')) return nameOf(tokens[i + 2]);
  return nameOf(tokens[i]);
}

/**
 * The table (or view, or the table an index is on) a write statement touches, read off its
 * tokens by the guard's classifier; undefined when it cannot be told (then nothing is linked).
 * Best effort, for a link in the approvals inbox: never an authorization input.
 */
export function targetTable(sql: string): string | undefined {
  const parsed = parseStatement(sql);
  if (!('tokens' in parsed)) return undefined;
  const { tokens, classification: c } = parsed;
  let i = c.verb + 1;
  const skipOr = () => {
    if (isWord(tokens[i], 'or')) i += 2;
  };
  const skipIfNotExists = () => {
    if (isWord(tokens[i], 'if')) i += 3;
  };
  switch (c.kind) {
    case 'insert':
    case 'replace':
      skipOr();
      if (!isWord(tokens[i], 'into')) return undefined;
      return qualifiedName(tokens, i + 1);
    case 'update':
      skipOr();
      return qualifiedName(tokens, i);
    case 'delete':
      if (!isWord(tokens[i], 'from')) return undefined;
      return qualifiedName(tokens, i + 1);
    case 'create_table':
    case 'create_view':
    case 'alter_table': {
      while (i < tokens.length && !isWord(tokens[i], 'table', 'view')) i++;
      i++;
      skipIfNotExists();
      return qualifiedName(tokens, i);
    }
    case 'create_index': {
      while (i < tokens.length && !isWord(tokens[i], 'on')) i++;
      return qualifiedName(tokens, i + 1);
    }
    default:
      return undefined;
  }
}
