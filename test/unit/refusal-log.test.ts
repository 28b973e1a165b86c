import { expect, it } from 'vitest';
import { RefusalLog } from '../../src/http/refusal-log.ts';

it('logs an address’s first refusals of a minute, counts the rest, and says so on its next line', () => {
  let now = 0;
  const log = new RefusalLog(3, () => now);
  const first = Array.from({ length: 5 }, () => log.refused('10.0.0.1'));
  expect(first.map((l) => l.log)).toEqual([true, true, true, false, false]);
  // Another address has its own lines.
  expect(log.refused('10.0.0.2')).toEqual({ log: true, unlogged: 0 });
  now = 60_000;
  expect(log.refused('10.0.0.1')).toEqual({ log: true, unlogged: 2 });
  expect(log.refused('10.0.0.1')).toEqual({ log: true, unlogged: 0 });
});
