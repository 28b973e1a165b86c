import { AgentDbError } from '../errors.ts';
import type { ActivityRow } from '../sqlite/sqlite-activity.ts';

/** Rows asked of the executor at once, and rows matched or commits read between looks at the clock. */
export const PIECE = 5_000;

/** A row's order and time: what matching needs of it. */
export type RowOrder = Pick<ActivityRow, 'seq' | 'kind' | 'at'>;

/** How the listing reads a database's activity rows (through the executor, which opens database files). */
export interface ActivityRows {
  /** Every row's order and time, oldest first. */
  all(): Promise<RowOrder[]>;
  /** The whole rows of these seqs. */
  some(seqs: number[]): Promise<ActivityRow[]>;
  /** The rows after seq `after`, oldest first, at most `limit`, and how many rows there are up to it (fewer than read before: rows were pruned). */
  since?(after: number, limit?: number): Promise<{ rows: RowOrder[]; kept: number }>;
}

/** What reading rows answers to: the count of rows read (which may refuse past a bound), and the turn clock. */
export interface RowPace {
  /** Hears each piece of rows read and how many the read holds now; throws to stop it (RESOURCE_LIMIT past the read's bound). */
  counted(rows: number, held: number): void;
  /** Yields the thread when the turn is over (`TurnClock.tick`: nothing to wait for before). */
  tick(): Promise<void> | undefined;
}

/**
 * Database `id`'s activity rows, read on from `order` (the rows read before, oldest first): only
 * those added since, when `rows` can say which, else all. `fresh`: the rows were all read again
 * (the first time, or rows were pruned since), so the match starts over.
 * @throws AgentDbError RETRY_LATER when rows were pruned each time they were read again.
 */
export async function readRowsOn(rows: ActivityRows, order: RowOrder[], id: string, pace: RowPace): Promise<{ order: RowOrder[]; fresh: boolean }> {
  if (!rows.since) {
    const all = await rows.all();
    pace.counted(all.length, all.length);
    return { order: all, fresh: true };
  }
  const after = order.at(-1)?.seq ?? 0;
  if (await appendSince(rows, order, after, pace)) return { order, fresh: after === 0 };
  // Rows were pruned since (or while they were read): all again, once more at most.
  for (let again = 0; again < 2; again++) {
    const anew: RowOrder[] = [];
    if (await appendSince(rows, anew, 0, pace)) return { order: anew, fresh: true };
  }
  throw new AgentDbError('RETRY_LATER', `${id}'s activity rows were pruned while they were read`);
}

/**
 * Appends to `order` the rows after seq `after` in pieces of {@link PIECE} (one message of every
 * row parsed in one turn of the worker's thread); false when rows up to a piece's start were
 * pruned meanwhile (fewer than read).
 */
async function appendSince(rows: ActivityRows, order: RowOrder[], after: number, pace: RowPace): Promise<boolean> {
  for (;;) {
    const got = await rows.since!(after, PIECE);
    if (got.kept !== order.length) return false;
    for (const r of got.rows) order.push(r);
    pace.counted(got.rows.length, order.length);
    if (got.rows.length < PIECE) return true;
    after = got.rows.at(-1)!.seq;
    await pace.tick();
  }
}
