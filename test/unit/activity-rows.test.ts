import { describe, expect, it } from 'vitest';
import { PIECE, readRowsOn, type ActivityRows, type RowOrder } from '../../src/history/activity-rows.ts';

const row = (seq: number): RowOrder => ({ seq, kind: 'call', at: seq });

/** Rows kept as the executor keeps them: `since` answers those after a seq and how many are up to it. */
function kept(seqs: number[]): ActivityRows & { seqs: number[]; asked: number } {
  const rows = {
    seqs,
    asked: 0,
    all: async () => rows.seqs.map(row),
    some: async () => [],
    since: async (after: number, limit = Infinity) => {
      rows.asked++;
      return {
        rows: rows.seqs
          .filter((s) => s > after)
          .slice(0, limit)
          .map(row),
        kept: rows.seqs.filter((s) => s <= after).length,
      };
    },
  };
  return rows;
}

const pace = (log: [number, number][] = []) => ({ counted: (n: number, held: number) => void log.push([n, held]), tick: () => undefined });

describe('readRowsOn: the activity list reads the rows added since, in pieces', () => {
  it('reads all the first time, then only the rows added since, onto the same list', async () => {
    const rows = kept([1, 2, 3]);
    const first = await readRowsOn(rows, [], 'acme/scout', pace());
    expect(first).toEqual({ order: [1, 2, 3].map(row), fresh: true });
    rows.seqs.push(4, 5);
    const log: [number, number][] = [];
    const next = await readRowsOn(rows, first.order, 'acme/scout', pace(log));
    expect(next.fresh).toBe(false);
    expect(next.order).toBe(first.order);
    expect(next.order.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(log).toEqual([[2, 5]]);
  });

  it('reads a long history in pieces of PIECE rows', async () => {
    const rows = kept(Array.from({ length: PIECE * 2 + 1 }, (_, i) => i + 1));
    const log: [number, number][] = [];
    const read = await readRowsOn(rows, [], 'acme/scout', pace(log));
    expect(read.order).toHaveLength(PIECE * 2 + 1);
    expect(log).toEqual([
      [PIECE, PIECE],
      [PIECE, PIECE * 2],
      [1, PIECE * 2 + 1],
    ]);
  });

  it('reads all again, fresh, when rows were pruned since; counting only the rows read anew as held', async () => {
    const rows = kept([1, 2, 3]);
    const first = await readRowsOn(rows, [], 'acme/scout', pace());
    rows.seqs = [3, 4];
    const log: [number, number][] = [];
    const again = await readRowsOn(rows, first.order, 'acme/scout', pace(log));
    expect(again).toEqual({ order: [row(3), row(4)], fresh: true });
    expect(log).toEqual([[2, 2]]);
  });

  it('answers RETRY_LATER when rows are pruned every time they are read', async () => {
    const rows = kept([1, 2, 3]);
    const pruning: ActivityRows = { ...rows, since: async (after, limit) => ({ ...(await rows.since!(after, limit)), kept: -1 }) };
    await expect(readRowsOn(pruning, [], 'acme/scout', pace())).rejects.toMatchObject({ code: 'RETRY_LATER' });
  });

  it('reads all at once from rows that cannot say what was added', async () => {
    const rows: ActivityRows = { all: async () => [row(1), row(2)], some: async () => [] };
    const log: [number, number][] = [];
    expect(await readRowsOn(rows, [row(1)], 'acme/scout', pace(log))).toEqual({ order: [row(1), row(2)], fresh: true });
    expect(log).toEqual([[2, 2]]);
  });

  it('stops when the pace refuses (the read limit)', async () => {
    const rows = kept(Array.from({ length: PIECE + 10 }, (_, i) => i + 1));
    const refusing = {
      counted: (_n: number, held: number) => {
        if (held > PIECE) throw new Error('RESOURCE_LIMIT');
      },
      tick: () => undefined,
    };
    await expect(readRowsOn(rows, [], 'acme/scout', refusing)).rejects.toThrow('RESOURCE_LIMIT');
  });
});
