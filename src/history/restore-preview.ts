import type { ActivityEntry } from './activity-view.ts';

/** Entries a restore's dry run lists of what it takes away; past them it says there are more. */
export const RESTORE_PREVIEW_ENTRIES = 50;

/** An entry's place in history's order: generation, segment, commit; a gap and the calls it holds at their generation's start. */
type Place = [string, string, number];

function placeOf(position: string): Place {
  const [generation = '', segment = '', n] = position.split('~')[0]!.split('.');
  // `<generation>` (a gap, a generation's first state) and `<generation>.held.<seq>` (a call a gap's snapshot holds).
  if (segment === '' || segment === 'held') return [generation, '', -1];
  return [generation, segment, Number(n)];
}

/** Whether `a` comes after `b` in history (generation and segment names are of one width). */
function isAfter(a: Place, b: Place): boolean {
  if (a[0] !== b[0]) return a[0] > b[0];
  if (a[1] !== b[1]) return a[1] > b[1];
  return a[2] > b[2];
}

/**
 * Of a page of the activity list (newest first), the entries after history position `state` (a
 * restore plan's, `RestorePlan.state`): the calls, restores and outside writes a restore to that
 * state takes away. The list is in history's order, so they are its first entries; `done` says
 * whether an entry at or before the state was reached (else the next page may hold more), and
 * `kept` is that entry: the newest the restore keeps. A state later than `kept`'s own position is
 * agentdb's upkeep after it (a decision's audit row, say), which only `history --all-commits` lists.
 */
export function entriesAfter(entries: readonly ActivityEntry[], state: string): { after: ActivityEntry[]; done: boolean; kept?: ActivityEntry } {
  const place = placeOf(state);
  const end = entries.findIndex((e) => !isAfter(placeOf(e.id), place));
  return end < 0 ? { after: [...entries], done: false } : { after: entries.slice(0, end), done: true, kept: entries[end]! };
}
