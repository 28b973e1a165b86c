/**
 * A commit's id (`<generation>.<segment>.<n>`, an activity entry's) as a key in history's order:
 * generation and segment names are of one width, so they compare as text, then the number.
 */
export type IdKey = [string, string, number];

/** The key of `id`, or undefined for text of another form. */
export function idKey(id: string): IdKey | undefined {
  const [gen, seg, n, ...rest] = id.split('.');
  if (gen === undefined || seg === undefined || n === undefined || rest.length || String(Number(n)) !== n) return undefined;
  return [gen, seg, Number(n)];
}

export function compareKeys(a: IdKey, b: IdKey): number {
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1;
  if (a[1] !== b[1]) return a[1] < b[1] ? -1 : 1;
  return a[2] - b[2];
}
