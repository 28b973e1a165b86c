import { describe, expect, it } from 'vitest';
import { PageIndex } from '../../src/history/frame-scan.ts';

describe("a restore plan's page index", () => {
  it('keeps the latest image of each page, in page order, up to a bound', () => {
    const index = new PageIndex();
    const a = index.file('a.wal');
    const b = index.file('b.wal');
    index.set(3, a, 100);
    index.set(5000, a, 200);
    index.set(3, b, 300);
    expect(index.size).toBe(2);
    expect(index.get(3)).toEqual({ file: 'b.wal', offset: 300 });
    expect(index.get(4)).toBeUndefined();
    expect([...index.entries(10_000)]).toEqual([
      [3, { file: 'b.wal', offset: 300 }],
      [5000, { file: 'a.wal', offset: 200 }],
    ]);
    expect([...index.entries(4999).keys()]).toEqual([3]);
  });

  it('notes a page number in the billions without allocating for every page below it', () => {
    const index = new PageIndex();
    const f = index.file('s.wal');
    index.set(7, f, 1);
    index.set(2 ** 31 + 5, f, 2);
    index.set(4_294_967_294, f, 3);
    index.set(2 ** 31 + 5, f, 4);
    expect(index.size).toBe(3);
    expect(index.get(2 ** 31 + 5)).toEqual({ file: 's.wal', offset: 4 });
    expect([...index.entries(Number.MAX_SAFE_INTEGER).keys()]).toEqual([7, 2 ** 31 + 5, 4_294_967_294]);
    expect([...index.entries(2 ** 31).keys()]).toEqual([7]);
  });
});
