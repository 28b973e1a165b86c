/** Entries a restore's dry run lists of what it takes away; past them it says how many more. */
export const RESTORE_PREVIEW_ENTRIES = 50;

/** An entry's place in history's order: generation, segment, commit; a gap and the calls it holds at their generation's start. */
type Place = [string, string, number];

function placeOf(position: string): Place {
  const [generation = '', segment = '', n] = position.split('~')[0]!.split('.');
  // `<generation>` (a gap, a generation's first state) and `<generation>.held.<seq>` (a call a gap's snapshot holds).
  if (segment === '' || segment === 'held') return [generation, '', -1];
  return [generation, segment, Number(n)];
}

/**
 * Whether history position (or activity entry id) `a` comes after `b` in history (generation and
 * segment names are of one width): an entry after a restore's state (`RestorePlan.state`) is one
 * that restore takes away. The activity list is in history's order, so those entries are its
 * first; the first that is not is the newest the restore keeps. A state later than that entry's
 * own position is agentdb's upkeep after it (a decision's audit row, say), which only `history
 * --all-commits` lists.
 */
export function isAfterPosition(a: string, b: string): boolean {
  const [pa, pb] = [placeOf(a), placeOf(b)];
  if (pa[0] !== pb[0]) return pa[0] > pb[0];
  if (pa[1] !== pb[1]) return pa[1] > pb[1];
  return pa[2] > pb[2];
}
