/**
 * Agent text shown in a list is cut to a bounded size. A parked call may carry 100 KB of SQL and
 * ~1 MB of params: shown whole on every card (and fetched again by every open inbox on every
 * approval event), one agent could make its workspace's inbox megabytes to gigabytes of HTML.
 */

/** How much of an approval's SQL, and of its params, a card shows. */
export const CARD_TEXT_BYTES = 4096;

/** Text cut to at most `maxBytes` of UTF-8, and how many bytes it had in all. */
export interface Cut {
  text: string;
  /** True when `text` is only the start. */
  cut: boolean;
  /** UTF-8 bytes of the whole text. */
  bytes: number;
}

/** The start of `text` in at most `maxBytes` UTF-8 bytes, never splitting a character. */
export function cutText(text: string, maxBytes: number): Cut {
  // Every UTF-16 unit is at most 3 UTF-8 bytes: short text needs no encoding to be known whole.
  if (text.length * 3 <= maxBytes) return { text, cut: false, bytes: Buffer.byteLength(text, 'utf8') };
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= maxBytes) return { text, cut: false, bytes };
  const buf = Buffer.from(text, 'utf8');
  let end = maxBytes;
  // Back off continuation bytes (10xxxxxx) so the cut falls between two characters.
  while (end > 0 && (buf[end]! & 0xc0) === 0x80) end--;
  return { text: buf.subarray(0, end).toString('utf8'), cut: true, bytes };
}

/** A short text cut to `maxChars` characters with an ellipsis, for one-line cells. */
export function shorten(text: string, maxChars: number): string {
  return text.length > maxChars ? `${text.slice(0, maxChars - 1)}…` : text;
}
