// One state machine following tokenize.c's sqlite3GetToken branch by branch: its scanners are its
// states, and reading them side by side with tokenize.c is how it is checked (issue 26). The
// character classes its branches test are tokenize.c's and global.c's, in sqlite-chars.ts.
import { code, DIGIT_SEPARATOR, isDigit, isHex, isIdChar, isSpace, startsSpace, startsWord } from './sqlite-chars.ts';

/**
 * A SQLite tokenizer that splits SQL exactly where SQLite's own `sqlite3GetToken`
 * (tokenize.c, 3.53) does. The guard is only as good as its agreement with the engine on where
 * a string, a quoted name or a comment ends: one character of disagreement is a bypass. So
 * this follows tokenize.c branch by branch, including its odd corners (`/*` at the very end
 * is a slash, a vertical tab may continue whitespace but not start it, `$` is a name
 * character, a number glued to a letter is illegal).
 *
 * JavaScript strings are UTF-16 while SQLite reads UTF-8; every byte at or above 0x80 is a
 * name character to SQLite, so every UTF-16 unit at or above 0x80 is one here. The one
 * exception SQLite makes, the UTF-8 byte order mark, is U+FEFF here. A lone surrogate has no
 * UTF-8 form: better-sqlite3 hands SQLite U+FFFD in its place, so SQLite would read another
 * character than the one judged here (a parameter `:\uD800` is then a name the binding cannot
 * match). Such text is refused whole.
 */

/** What a token is. `word` is a bare identifier or keyword; `quoted` a quoted identifier. */
export type TokenKind = 'space' | 'comment' | 'word' | 'quoted' | 'string' | 'blob' | 'number' | 'param' | 'operator' | 'semicolon';

/** One token of SQL text. */
export interface Token {
  readonly kind: TokenKind;
  /** The token exactly as written. */
  readonly text: string;
  /**
   * The token's meaning: for `word` and `quoted` the name without quotes and with ASCII
   * letters lower-cased (SQLite compares names ASCII-case-insensitively, nothing more); for
   * `string` the unquoted content as written; for `blob` the hex digits lower-cased; else the
   * text.
   */
  readonly value: string;
  /** Offset of the token's first character in the SQL. */
  readonly offset: number;
}

/** The tokens of a whole SQL text, or why SQLite would not tokenize it. */
export type TokenizeResult = { ok: true; tokens: Token[] } | { ok: false; reason: string; offset: number };

/** Token kinds that are not part of any statement. */
export function isTrivia(token: Token): boolean {
  return token.kind === 'space' || token.kind === 'comment';
}

/** Lower-cases A-Z only, as SQLite's `sqlite3UpperToLower` does. */
export function asciiLower(text: string): string {
  return text.replace(/[A-Z]+/g, (s) => s.toLowerCase());
}

// With the u flag a well-formed pair is one code point above U+FFFF: only halves alone match.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/** Offset of the first UTF-16 surrogate that is not half of a pair, or -1. */
export function loneSurrogate(text: string): number {
  return LONE_SURROGATE.exec(text)?.index ?? -1;
}

/**
 * Splits SQL into tokens, whitespace and comments included. Fails (SQLite's "unrecognized
 * token") on an unterminated string or quoted name, an illegal character, a malformed blob or
 * number, a parameter without a name, on NUL, which would silently end SQLite's input, and on a
 * lone surrogate, which SQLite would read as U+FFFD.
 */
export function tokenize(sql: string): TokenizeResult {
  const lone = loneSurrogate(sql);
  if (lone >= 0) {
    return { ok: false, reason: `lone UTF-16 surrogate at offset ${lone}: SQLite would read it as U+FFFD; send valid Unicode text`, offset: lone };
  }
  const tokens: Token[] = [];
  let i = 0;
  while (i < sql.length) {
    const step = scan(sql, i);
    if ('error' in step) return { ok: false, reason: step.error, offset: i };
    const text = sql.slice(i, step.end);
    tokens.push({ kind: step.kind, text, value: tokenValue(step.kind, text), offset: i });
    i = step.end;
  }
  return { ok: true, tokens };
}

type Step = { kind: TokenKind; end: number } | { error: string };

function unrecognized(sql: string, start: number, end: number): Step {
  const shown = sql.slice(start, Math.min(end, start + 40));
  return { error: `unrecognized token at offset ${start}: ${JSON.stringify(shown)}` };
}

function scan(sql: string, i: number): Step {
  const c = code(sql, i);
  const c1 = code(sql, i + 1);
  if (startsSpace(c)) {
    let j = i + 1;
    while (j < sql.length && isSpace(code(sql, j))) j++;
    return { kind: 'space', end: j };
  }
  if (c === 0xfeff) return { kind: 'space', end: i + 1 };
  switch (c) {
    case 0x2d: // -
      if (c1 === 0x2d) {
        const nl = sql.indexOf('\n', i + 2);
        return { kind: 'comment', end: nl < 0 ? sql.length : nl };
      }
      if (c1 === 0x3e) return { kind: 'operator', end: i + (code(sql, i + 2) === 0x3e ? 3 : 2) };
      return { kind: 'operator', end: i + 1 };
    case 0x2f: {
      // '/': a comment needs at least one character after "/*" (tokenize.c tests z[2]==0).
      if (c1 !== 0x2a || i + 2 >= sql.length) return { kind: 'operator', end: i + 1 };
      const close = sql.indexOf('*/', i + 2);
      return { kind: 'comment', end: close < 0 ? sql.length : close + 2 };
    }
    case 0x3b:
      return { kind: 'semicolon', end: i + 1 };
    case 0x28:
    case 0x29:
    case 0x2b:
    case 0x2a:
    case 0x25:
    case 0x2c:
    case 0x26:
    case 0x7e:
      return { kind: 'operator', end: i + 1 };
    case 0x3d: // = ==
      return { kind: 'operator', end: i + (c1 === 0x3d ? 2 : 1) };
    case 0x3c: // < <= <> <<
      return { kind: 'operator', end: i + (c1 === 0x3d || c1 === 0x3e || c1 === 0x3c ? 2 : 1) };
    case 0x3e: // > >= >>
      return { kind: 'operator', end: i + (c1 === 0x3d || c1 === 0x3e ? 2 : 1) };
    case 0x21: // != only
      return c1 === 0x3d ? { kind: 'operator', end: i + 2 } : unrecognized(sql, i, i + 1);
    case 0x7c: // | ||
      return { kind: 'operator', end: i + (c1 === 0x7c ? 2 : 1) };
    case 0x27: // '
    case 0x22: // "
    case 0x60: // `
      return scanQuoted(sql, i, c);
    case 0x5b: {
      // [...] has no escapes: the first ']' ends it.
      const close = sql.indexOf(']', i + 1);
      if (close < 0) return { error: `unterminated [identifier starting at offset ${i}` };
      return { kind: 'quoted', end: close + 1 };
    }
    case 0x2e: // .
      if (!isDigit(c1)) return { kind: 'operator', end: i + 1 };
      return scanNumber(sql, i);
    case 0x3f: {
      // ?NNN
      let j = i + 1;
      while (isDigit(code(sql, j))) j++;
      return { kind: 'param', end: j };
    }
    case 0x24: // $
    case 0x40: // @
    case 0x3a: // :
    case 0x23: {
      // '#'. SQLITE_OMIT_TCL_VARIABLE is set in better-sqlite3's build: no "::" or "(...)".
      let j = i + 1;
      while (j < sql.length && isIdChar(code(sql, j))) j++;
      return j === i + 1 ? unrecognized(sql, i, j) : { kind: 'param', end: j };
    }
  }
  if (isDigit(c)) return scanNumber(sql, i);
  if ((c === 0x78 || c === 0x58) && c1 === 0x27) return scanBlob(sql, i);
  if (startsWord(c)) {
    let j = i + 1;
    while (j < sql.length && isIdChar(code(sql, j))) j++;
    return { kind: 'word', end: j };
  }
  if (c === 0) return { error: `NUL character at offset ${i}: SQLite would ignore everything after it` };
  return unrecognized(sql, i, i + 1);
}

function scanQuoted(sql: string, i: number, delim: number): Step {
  let j = i + 1;
  for (;;) {
    if (j >= sql.length) {
      const what = delim === 0x27 ? 'string literal' : 'quoted identifier';
      return { error: `unterminated ${what} starting at offset ${i}` };
    }
    const c = code(sql, j);
    if (c === 0) return { error: `NUL character at offset ${j}: SQLite would ignore everything after it` };
    if (c === delim) {
      if (code(sql, j + 1) === delim) {
        j += 2;
        continue;
      }
      return { kind: delim === 0x27 ? 'string' : 'quoted', end: j + 1 };
    }
    j++;
  }
}

function scanBlob(sql: string, i: number): Step {
  let j = i + 2;
  while (isHex(code(sql, j))) j++;
  if (code(sql, j) !== 0x27 || (j - i) % 2 === 1) {
    return { error: `malformed blob literal at offset ${i}: x'…' takes an even number of hex digits` };
  }
  return { kind: 'blob', end: j + 1 };
}

/** Digits, with the `_` separator SQLite 3.46+ accepts between them. */
function skipDigits(sql: string, j: number, hex: boolean): number {
  for (;;) {
    const c = code(sql, j);
    if ((hex ? isHex(c) : isDigit(c)) || c === DIGIT_SEPARATOR) j++;
    else return j;
  }
}

function scanNumber(sql: string, i: number): Step {
  let j: number;
  if (code(sql, i) === 0x30 && (code(sql, i + 1) | 0x20) === 0x78 && isHex(code(sql, i + 2))) {
    j = skipDigits(sql, i + 3, true);
  } else {
    j = skipDigits(sql, i, false);
    if (code(sql, j) === 0x2e) j = skipDigits(sql, j + 1, false);
    const e = code(sql, j);
    if (e === 0x65 || e === 0x45) {
      const s = code(sql, j + 1);
      if (isDigit(s)) j = skipDigits(sql, j + 1, false);
      else if ((s === 0x2b || s === 0x2d) && isDigit(code(sql, j + 2))) j = skipDigits(sql, j + 2, false);
    }
  }
  if (j < sql.length && isIdChar(code(sql, j))) {
    let k = j;
    while (k < sql.length && isIdChar(code(sql, k))) k++;
    return unrecognized(sql, i, k);
  }
  // sqlite3DequoteNumber: each separator must sit between two digits.
  const hex = (code(sql, i + 1) | 0x20) === 0x78;
  for (let k = i; k < j; k++) {
    if (code(sql, k) !== DIGIT_SEPARATOR) continue;
    const ok = hex ? isHex(code(sql, k - 1)) && isHex(code(sql, k + 1)) : isDigit(code(sql, k - 1)) && isDigit(code(sql, k + 1));
    if (!ok) return unrecognized(sql, i, j);
  }
  return { kind: 'number', end: j };
}

function tokenValue(kind: TokenKind, text: string): string {
  switch (kind) {
    case 'word':
      return asciiLower(text);
    case 'quoted': {
      const open = text[0]!;
      if (open === '[') return asciiLower(text.slice(1, -1));
      return asciiLower(
        text
          .slice(1, -1)
          .split(open + open)
          .join(open),
      );
    }
    case 'string':
      return text.slice(1, -1).split("''").join("'");
    case 'blob':
      return asciiLower(text.slice(2, -1));
    default:
      return text;
  }
}
