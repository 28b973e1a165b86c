/**
 * HTML built from template literals where every interpolation is escaped unless it is already
 * {@link Html} (made by this same tag or by {@link raw}). Everything an agent stored is
 * untrusted (DESIGN.md "Approvals"): a cell holding `<script>` must show those characters, so
 * escaping is the default and opting out has to be spelled.
 */

/** Markup that is safe to insert as it is. */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/**
 * Bidi embeddings, overrides and isolates: invisible, they reorder the text after them, so an
 * agent's SQL could read as another statement than the one that runs ("Trojan Source"). They
 * are shown by name instead; the implicit marks (LRM, RLM) that right-to-left text uses stay.
 */
const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069]/g;

/** Text as HTML text or attribute value: `& < > " '` become entities, bidi controls their names. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!).replace(BIDI_CONTROLS, (c) => `[U+${c.codePointAt(0)!.toString(16).toUpperCase()}]`);
}

/** Trusted markup, written by agentdb itself. Never pass anything a caller or agent wrote. */
export function raw(markup: string): Html {
  return new Html(markup);
}

function render(value: unknown): string {
  if (value instanceof Html) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

/** The tag: `html\`<p>${text}</p>\`` escapes `text`; arrays of Html join; null, undefined and false render nothing. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]!;
  return new Html(out);
}
