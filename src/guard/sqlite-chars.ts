/**
 * How SQLite classes a character while it tokenizes: tokenize.c's `aiClass` (what may start a
 * token) and global.c's `sqlite3CtypeMap` (what may continue one), for the tokenizer
 * (tokenizer.ts) to test branch by branch as `sqlite3GetToken` does. Every UTF-16 unit at or
 * above 0x80 stands for a byte SQLite reads as a name character (see tokenizer.ts).
 */

/** The UTF-16 unit at `i`, or 0 past the end (SQLite reads its input up to a NUL). */
export function code(sql: string, i: number): number {
  return i < sql.length ? sql.charCodeAt(i) : 0;
}

/** Characters that may start whitespace (tokenize.c's CC_SPACE class). */
export function startsSpace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d;
}

/** `sqlite3Isspace`: what may continue whitespace, which adds the vertical tab. */
export function isSpace(c: number): boolean {
  return c === 0x20 || (c >= 0x09 && c <= 0x0d);
}

/** ASCII 0-9. */
export function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/** ASCII hex digits, either case (`sqlite3Isxdigit`). */
export function isHex(c: number): boolean {
  return isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

/** ASCII letters only: SQLite's classes know no others. */
export function isAlpha(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
}

/** SQLite's `IdChar`: letters, digits, `_`, `$` and every non-ASCII character. */
export function isIdChar(c: number): boolean {
  return isAlpha(c) || isDigit(c) || c === 0x5f || c === 0x24 || c >= 0x80;
}

/** Characters that start a bare identifier or keyword. */
export function startsWord(c: number): boolean {
  return isAlpha(c) || c === 0x5f || (c >= 0x80 && c !== 0xfeff);
}

/** '_', SQLITE_DIGIT_SEPARATOR: allowed between the digits of a number. */
export const DIGIT_SEPARATOR = 0x5f;
