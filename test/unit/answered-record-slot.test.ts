// The answered note's slot is built by hand into one kept buffer (`recordSlot`, issue 31): its
// bytes must be the very ones the JSON form made (`recordText`), which every reader of the
// answered file (and every file written before) holds to, for every width of its numbers.
import { describe, expect, it } from 'vitest';
import { recordSlot, recordText, type Answered } from '../../src/history/answered-commits.ts';

const records: Answered[] = [
  { salt1: 0, salt2: 0, frame: 1, c1: 0, c2: 0, at: 0, n: 0 },
  { salt1: 4294967295, salt2: 4294967295, frame: 4294967295, c1: 4294967295, c2: 4294967295, at: 8_640_000_000_000_000, n: Number.MAX_SAFE_INTEGER },
  { salt1: 123456789, salt2: 2, frame: 4321, c1: 3123456789, c2: 17, at: 1_796_680_981_644, n: 255 },
  { salt1: 1, salt2: 2, frame: 3, c1: 4, c2: 5, at: 1.5, n: 7 },
];

describe("the answered note's slot", () => {
  it('is byte for byte what the JSON form writes', () => {
    for (const r of records) expect(Buffer.from(recordSlot(r)).toString('latin1')).toBe(recordText(r));
  });

  it('leaves nothing of a longer record in the next one', () => {
    const long = records[1]!;
    const short = records[0]!;
    recordSlot(long);
    expect(recordSlot(short).toString('latin1')).toBe(recordText(short));
  });

  it('takes the JSON form for a record without its number', () => {
    const { n: _n, ...unnumbered } = records[2]!;
    expect(recordSlot(unnumbered).toString('latin1')).toBe(recordText(unnumbered));
  });
});
