/**
 * CSV as RFC 4180 writes it: fields separated by `,`, records ended by CRLF, a field quoted
 * (inner quotes doubled) when it holds `"`, `,`, CR or LF. Text is UTF-8 without a byte order
 * mark, so a file compares byte for byte with what any other writer of the same rules makes.
 *
 * Formula injection: a spreadsheet runs a text cell that starts with `=`, `+`, `-`, `@` (also
 * after leading spaces or line breaks), a tab or a carriage return as a formula, and agents store
 * text scraped from anywhere. Such a text cell (and a column name) is written with a `'` in front, which spreadsheets show and never
 * run (OWASP "CSV Injection"). Numbers are written as they are: `-5` stored as a number is a
 * number, not a formula.
 */

const NEEDS_QUOTES = /[",\r\n]/;
// Spreadsheets skip leading whitespace (spaces, LF, CR, tab…) before deciding a cell is a
// formula, so `"  =1+1"` and `"\n=1+1"` run too: look at the first non-whitespace character.
const FORMULA_START = /^[\t\r]|^\s*[=+\-@]/;

/**
 * One text value made safe to open in a spreadsheet: a text cell starting with a tab or CR, or
 * whose first non-whitespace character is `=`, `+`, `-` or `@`, gets `'` in front.
 */
export function neutralised(text: string): string {
  return FORMULA_START.test(text) ? `'${text}` : text;
}

/** One field, quoted when RFC 4180 requires it. */
export function quoted(text: string): string {
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/**
 * One SQLite value as a CSV field: NULL is empty, integers (read as bigints, so 64-bit ids stay
 * exact) and reals as their decimal text, text neutralised and quoted, a blob as `0x` and its
 * hex digits.
 */
export function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'bigint' || typeof value === 'number') return String(value);
  if (Buffer.isBuffer(value)) return `0x${value.toString('hex')}`;
  return quoted(neutralised(String(value)));
}

/** One record, CRLF included. */
export function csvRecord(values: readonly unknown[]): string {
  let line = '';
  for (let i = 0; i < values.length; i++) line += (i ? ',' : '') + csvField(values[i]);
  return `${line}\r\n`;
}

/** The header record: column names are text an agent chose, so they are neutralised too. */
export function csvHeader(columns: readonly string[]): string {
  return csvRecord(columns);
}
