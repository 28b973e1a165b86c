import { type AgentDbError, codeOf } from '../errors.ts';
import type { ActivityEntry } from './activity-view.ts';

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

/** What a restore takes away, as `RestoreResult.after` holds it (its note aside). */
export interface TakenAway {
  entries: ActivityEntry[];
  more: boolean;
  count?: number;
  kept?: ActivityEntry;
}

/**
 * A page of the activity list asked for the entries after a state (`after`) refused by a worker
 * built before it took that (session 36, N13), as any key it does not know is: during a rolling
 * deploy the new caller met it on every dry run ("not listed: INVALID_ARGUMENTS") and restore
 * done (no count). Its refusal names the key.
 */
export function refusedAfter(err: unknown): boolean {
  return codeOf(err) === 'INVALID_ARGUMENTS' && /\bafter\b/.test((err as AgentDbError).detail ?? '');
}

/** The plain page an older worker is asked instead: a restore's own entry, a preview's entries, and one more to see past them. */
export const OLDER_WORKER_PAGE = RESTORE_PREVIEW_ENTRIES + 2;

/**
 * What a restore to `state` takes away, read from a plain page of the list (newest first), as the
 * caller did before the page took `after`: the entries after the state are its first ones, the
 * first that is not is `kept`. Counted only when the page reached it (`next`: the page was not
 * the list's last); else `more`, and the texts say "at least" and "and more".
 */
export function takenFromPage(page: readonly ActivityEntry[], state: string, next: boolean): TakenAway {
  const end = page.findIndex((e) => !isAfterPosition(e.id, state));
  const after = end < 0 ? [...page] : page.slice(0, end);
  const entries = after.slice(0, RESTORE_PREVIEW_ENTRIES);
  if (end >= 0) return { entries, more: after.length > entries.length, count: after.length, kept: page[end]! };
  return next ? { entries, more: true } : { entries, more: after.length > entries.length, count: after.length };
}
