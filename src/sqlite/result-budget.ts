import { MAX_NAME_BYTES } from '../guard/guard.ts';

/**
 * Room kept out of MAX_RESULT_BYTES for what surrounds a result: the envelope (`ok`, a call id of
 * up to 128 characters, the tool, `credits`, `untrusted`: about 220 bytes) and the result's own
 * fixed fields (`changes`, `lastInsertRowid`, `truncated`, `oversize`, a short `note`: about 330).
 * What a result measures against is MAX_RESULT_BYTES less this, so the whole envelope fits.
 */
export const ENVELOPE_RESERVE_BYTES = 1024;

/** The bytes of JSON a result's columns, rows or tables may take so that its envelope fits. */
export function resultBudget(maxResultBytes: number): number {
  return Math.max(0, maxResultBytes - ENVELOPE_RESERVE_BYTES);
}

/** The size of `value` as JSON, in UTF-8 bytes (what Redis and the caller receive). */
export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
}

/**
 * `text` as it may appear in a result: unchanged up to `maxBytes` (UTF-8), else its start and a
 * marker saying how long it was, `abc…[90000 bytes]`, within `maxBytes` in all. Column names,
 * declared types and defaults come from an agent-writable schema: a view over a 90,000-byte
 * expression names its column with the whole expression.
 */
export function shortened(text: string, maxBytes: number = MAX_NAME_BYTES): string {
  // A UTF-16 unit is at most 3 UTF-8 bytes: short text skips the measure.
  if (text.length * 3 <= maxBytes) return text;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= maxBytes) return text;
  const marker = `…[${bytes} bytes]`;
  let room = maxBytes - Buffer.byteLength(marker, 'utf8');
  let end = 0;
  // By code point, so a character is never cut in half (a half would become U+FFFD).
  for (const ch of text) {
    const size = Buffer.byteLength(ch, 'utf8');
    if (size > room) break;
    room -= size;
    end += ch.length;
  }
  return text.slice(0, end) + marker;
}
