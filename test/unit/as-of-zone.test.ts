import { afterEach, describe, expect, it } from 'vitest';
import { parseAsOf } from '../../src/contracts/as-of.ts';
import { parseMoment } from '../../src/shards/history-client.ts';

// Review 19 (H29): a time without a zone is UTC, as the contracts say, whatever the server's own
// zone: "2026-12-04 19:58:33" (a space, as people and SQLite write it) was read in the server's
// zone by Date.parse, so as_of and restores went to another moment on a server not set to UTC.
describe('times without a zone are UTC', () => {
  const tz = process.env.TZ;
  afterEach(() => {
    if (tz === undefined) delete process.env.TZ;
    else process.env.TZ = tz;
  });

  it('reads a date and time separated by a space as UTC on a server in another zone', () => {
    process.env.TZ = 'America/New_York';
    const utc = Date.UTC(2026, 11, 4, 19, 58, 33);
    for (const text of ['2026-12-04 19:58:33', '2026-12-04T19:58:33', '2026-12-04 19:58:33Z', '2026-12-04T19:58:33+00:00']) {
      expect(parseAsOf(text), text).toEqual({ at: utc });
      expect(parseMoment(text), text).toBe(utc);
    }
    expect(parseAsOf('2026-12-04 19:58:33.250')).toEqual({ at: utc + 250 });
    expect(parseAsOf('2026-12-04')).toEqual({ at: Date.UTC(2026, 11, 4) });
    expect(parseMoment('2026-12-04')).toBe(Date.UTC(2026, 11, 4));
    expect(parseAsOf('2026-12-04 14:58:33-05:00')).toEqual({ at: utc });
  });
});
