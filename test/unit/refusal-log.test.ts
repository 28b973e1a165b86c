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

// Session 37, T18: counted by /64 alone, one IPv6 site (a /48, 65,536 /64s) had every refusal
// logged by sending each from a new /64. A /48 shares 4 times an address's lines.
it('gives the /64s of one IPv6 /48 four times an address’s lines between them, and says what went unlogged', () => {
  let now = 0;
  const log = new RefusalLog(3, () => now);
  const site = '2001:db8:7::/48';
  const lines = Array.from({ length: 20 }, (_, i) => log.refused(`2001:db8:7:${i + 1}::/64`, site));
  // main: 20 logged (each /64's first).
  expect(lines.filter((l) => l.log)).toHaveLength(12);
  // Another site, and an IPv4 address, have their own lines.
  expect(log.refused('2001:db8:8:1::/64', '2001:db8:8::/48').log).toBe(true);
  expect(log.refused('10.0.0.1').log).toBe(true);
  now = 60_000;
  expect(log.refused('2001:db8:7:99::/64', site)).toEqual({ log: true, unlogged: 8 });
});
