import { isTrivia, tokenize } from '../../../src/guard/tokenizer.ts';

function mixedCase(word: string): string {
  return [...word].map((ch, i) => (i % 2 ? ch.toLowerCase() : ch.toUpperCase())).join('');
}

/**
 * The same statement written differently: keywords in other cases, comments holding
 * dangerous-looking text between every pair of tokens, line comments instead of spaces.
 * None of these may change the verdict.
 */
export function variants(sql: string): string[] {
  const lexed = tokenize(sql);
  if (!lexed.ok) return [sql];
  const tokens = lexed.tokens.filter((t) => !isTrivia(t));
  const rejoin = (sep: string, word: (w: string) => string) =>
    tokens.map((t) => (t.kind === 'word' ? word(t.text) : t.text)).join(sep);
  return [
    sql,
    rejoin(' ', (w) => w.toUpperCase()),
    rejoin(' /* ; DROP TABLE t; PRAGMA x */ ', (w) => w.toLowerCase()),
    rejoin(" -- ; ATTACH 'x' AS y\n", mixedCase),
    rejoin('\t\r\n\f', (w) => w),
  ];
}
