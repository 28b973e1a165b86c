import { isTrivia, tokenize } from '../../../src/guard/tokenizer.ts';

/** Alternating case, ASCII letters only (what SQLite folds). */
function mixedCase(word: string): string {
  return [...word].map((ch, i) => (/[a-z]/i.test(ch) ? (i % 2 ? ch.toLowerCase() : ch.toUpperCase()) : ch)).join('');
}

/**
 * The same statement written differently: keywords and names in other cases, comments
 * holding dangerous-looking text between every pair of tokens, line comments instead of
 * spaces. None of these may change the verdict.
 */
export function variants(sql: string): string[] {
  const lexed = tokenize(sql);
  if (!lexed.ok) return [sql];
  const tokens = lexed.tokens.filter((t) => !isTrivia(t));
  const rejoin = (sep: string, word: (w: string) => string, kinds = ['word']) => tokens.map((t) => (kinds.includes(t.kind) ? word(t.text) : t.text)).join(sep);
  const names = ['word', 'quoted', 'string'];
  return [
    sql,
    rejoin(' ', (w) => w.toUpperCase()),
    rejoin(' /* ; DROP TABLE t; PRAGMA x */ ', (w) => w.toLowerCase()),
    rejoin(" -- ; ATTACH 'x' AS y\n", mixedCase),
    rejoin('\t\r\n\f', (w) => w),
    // SQLite compares names ASCII-case-insensitively, quoted or not, string or identifier.
    rejoin(' ', (w) => w.replace(/[a-z]+/g, (s) => s.toUpperCase()), names),
    rejoin(' ', (w) => mixedCase(w), names),
  ];
}
