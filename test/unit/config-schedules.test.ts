import { describe, expect, it } from 'vitest';
import { historyBackupsEnv } from '../../src/config/history-backups.ts';
import { cronError } from '../../src/config/env-checks.ts';

// A schedule's fallback is not parsed at each start (`cronSetting`: the parse is a tenth of a
// CLI command's CPU); this is where it is parsed, as BullMQ's job scheduler will.
describe('the schedules agentdb runs when none is set', () => {
  const entries = Object.entries(historyBackupsEnv) as [string, { parse(v: unknown): unknown }][];
  const crons = entries.filter(([name]) => name.endsWith('_CRON'));
  const zones = entries.filter(([name]) => name.endsWith('_TZ'));

  it('each cron fallback is a pattern BullMQ can run', () => {
    expect(crons.length).toBeGreaterThanOrEqual(4);
    for (const [name, entry] of crons) expect(cronError(String(entry.parse(undefined)), 'UTC'), name).toBeUndefined();
  });

  it('each time zone fallback is one cron-parser knows', () => {
    expect(zones.length).toBeGreaterThanOrEqual(2);
    for (const [name, entry] of zones) expect(cronError('0 0 * * *', String(entry.parse(undefined))), name).toBeUndefined();
  });
});
