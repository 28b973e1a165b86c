/**
 * Characters JSON.stringify leaves as they are that a terminal acts on instead of showing: DEL
 * and the C1 controls (U+009B is CSI, which starts the same cursor moves ESC [ does in terminals
 * that take C1 from UTF-8), format characters (bidi overrides and isolates reorder what follows
 * on the line, zero-width ones hide), and the line and paragraph separators. JSON.stringify
 * escapes only U+0000-U+001F. Rows an agent stored reach a person's terminal through `agentdb
 * call` and `agentdb result`; the approvals' text form escapes them already (approvals-table.ts).
 */
const UNSHOWN = /[\u007f-\u009f\p{Cf}\u2028\u2029]/gu;

/**
 * `value` as one line of JSON with those characters written as `\u` escapes: the same JSON to a
 * parser, nothing a terminal acts on. Outside strings JSON holds ASCII only, so every match is in
 * a string, where an escape means the character itself (a code point past U+FFFF as its pair).
 */
export function jsonLine(value: unknown): string {
  const text = JSON.stringify(value).replace(UNSHOWN, (c) =>
    c
      .split('')
      .map((unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`)
      .join(''),
  );
  return `${text}\n`;
}
