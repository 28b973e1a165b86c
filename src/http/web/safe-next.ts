/**
 * Where `/sign-in?next=` may send a member afterwards: a path on this site, never another host.
 * Prefix checks alone miss what browsers quietly repair (`/\t/evil.example` loses its tab and
 * becomes `//evil.example`), so the value is resolved as a browser would and the result must stay
 * on the same origin; control characters and backslashes, raw or percent-encoded, are refused
 * outright because browsers treat them as separators or strip them.
 */
const BASE = 'http://agentdb.invalid';
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what this refuses
const FORBIDDEN = /[\u0000-\u001f\u007f\\]|%(?:0[0-9a-f]|1[0-9a-f]|7f|5c)/i;
const ENCODED_SLASH = /%2f/i;

/** `next` when it is a same-site path starting with a single `/`, otherwise `fallback`. */
export function safeNext(next: unknown, fallback = '/inbox'): string {
  if (typeof next !== 'string' || next.length === 0 || next.length > 2048) return fallback;
  if (!next.startsWith('/') || next.startsWith('//') || FORBIDDEN.test(next)) return fallback;
  // `/%2F%2Fx` decodes to `//x` in whatever later reads the path; no page of ours needs `%2F` at the start.
  if (ENCODED_SLASH.test(next.slice(0, 4))) return fallback;
  let url: URL;
  try {
    url = new URL(next, BASE);
  } catch {
    return fallback;
  }
  if (url.origin !== BASE || !url.pathname.startsWith('/') || url.pathname.startsWith('//')) return fallback;
  // Checked again on the resolved path: `/./%2F%2Fx` passes the check above and resolves to `/%2F%2Fx`.
  if (ENCODED_SLASH.test(url.pathname.slice(0, 4))) return fallback;
  return url.pathname + url.search + url.hash;
}
