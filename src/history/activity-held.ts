import type { Group } from './activity-match.ts';
import type { RowOrder } from './activity-rows.ts';

/** What a held entry's id puts between its snapshot's generation and its row's seq: `g0000000002.held.65`. */
export const HELD = '.held.';

/**
 * A gap's snapshot as the list shows it: history began a new generation from the file after a
 * program outside agentdb wrote to it, and the snapshot holds that write and the calls committed
 * with it (`rows`: their seqs, oldest first), which history cannot tell apart.
 */
export interface HeldSlot {
  generation: string;
  at: number;
  /** The state before the gap: the last commit of the generation before. */
  before: string;
  rows: number[];
  /**
   * Not a gap but a restore in place that went in through SQLite (a program outside agentdb held
   * the file): its generation begins from a snapshot of the file restored, with no base commit for
   * its row, which that snapshot took. The row's seq: the slot is the restore's entry, its id the
   * generation (`--through` it keeps the restore), before it the state it replaced.
   */
  restore?: number;
}

/** A commit (its index) or, in a gap, the snapshot itself (no `seq`) or a call it holds. */
export type Item = number | { slot: HeldSlot; seq?: number };

/**
 * The gaps' snapshots, by the index of the first commit after each (the commits' count when none
 * follows yet), newest first. A history's first snapshot and a fork's hold commits too, but no
 * state before them is in this history, and agentdb's own first commits are what the first holds:
 * they stay unlisted.
 */
export function heldSlots(groups: Group[], commitCount: number, order: RowOrder[]): Map<number, HeldSlot[]> {
  const slots = new Map<number, HeldSlot[]>();
  let position = commitCount;
  for (let g = groups.length - 1; g >= 0; g--) {
    const group = groups[g]!;
    if (!group.snapshot) {
      position = group.commits[0] ?? position;
      continue;
    }
    const of = group.of;
    if (of?.before === undefined) continue;
    const at = slots.get(position) ?? [];
    if (of.reason === 'restore') {
      // Listed or not, its row is this snapshot's: no commit would show it (session 37, N15).
      const row = group.rows.filter((r) => order[r]!.kind === 'restore').at(-1);
      if (row === undefined) continue;
      at.push({ generation: of.generation, at: group.at, before: of.before, rows: [], restore: order[row]!.seq });
    } else if (of.reason === 'gap') {
      const rows = group.rows.filter((r) => order[r]!.kind !== 'upkeep').map((r) => order[r]!.seq);
      at.push({ generation: of.generation, at: group.at, before: of.before, rows });
    } else continue;
    slots.set(position, at);
  }
  return slots;
}

/** The items just before commit `position`, newest first: each gap's calls, newest first, then the gap. */
function itemsAt(slots: Map<number, HeldSlot[]>, position: number): Item[] {
  return (slots.get(position) ?? []).flatMap((slot) => [...slot.rows.map((seq) => ({ slot, seq })).reverse(), { slot }]);
}

/** The id of a gap's or a held call's entry. */
export function itemId(item: Exclude<Item, number>): string {
  return item.seq === undefined ? item.slot.generation : `${item.slot.generation}${HELD}${item.seq}`;
}

/** Where the gap's or held call's entry `id` is: before commit `position`, the `item`th there; or undefined. */
export function heldIndexOf(slots: Map<number, HeldSlot[]>, id: string): { position: number; item: number } | undefined {
  for (const [position] of slots) {
    const item = itemsAt(slots, position).findIndex((it) => typeof it !== 'number' && itemId(it) === id);
    if (item >= 0) return { position, item };
  }
  return undefined;
}

/**
 * The list's items newest first, from commit `start.commit` down (or, with `slotItem`, from
 * after that item of the gaps just after it): each commit `listed` says is an entry, and before
 * each commit the gaps' snapshots taken just before it.
 */
export function* itemsFrom(start: { commit: number; slotItem?: number }, slots: Map<number, HeldSlot[]>, listed: (i: number) => boolean): Generator<Item> {
  let i = start.commit;
  yield* itemsAt(slots, i + 1).slice(start.slotItem === undefined ? 0 : start.slotItem + 1);
  for (; i >= 0; i--) {
    if (listed(i)) yield i;
    yield* itemsAt(slots, i);
  }
}
