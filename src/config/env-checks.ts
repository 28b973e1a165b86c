// What the parts of the environment's schema (src/config/*.ts) check alike: bounded integers,
// cron patterns and time zones as BullMQ will read them, comma-separated lists.

import { createRequire } from 'node:module';
import { z } from 'zod';

/** An integer setting from `min` to `max`, `fallback` when unset. */
export const int = (min: number, max: number, fallback: number) => z.coerce.number().int().min(min).max(max).default(fallback);

/** The items of a comma-separated setting, trimmed, empty ones dropped. */
export function commaList(v: string): string[] {
  return v
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
}

/**
 * What is wrong with a schedule, or undefined when BullMQ can run it: the check is the parse
 * its job scheduler makes (cron-parser, the version BullMQ pins), run here so that a bad pattern
 * or time zone stops start-up with the variable's name instead of a stack trace from BullMQ.
 */
export function cronError(pattern: string, tz: string): string | undefined {
  try {
    // Loaded here, not at the top: see cronSetting.
    const cronParser = createRequire(import.meta.url)('cron-parser') as typeof import('cron-parser');
    // A bad time zone only shows when a date is computed.
    cronParser.parseExpression(pattern, { tz }).next();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * A schedule's setting: a cron pattern BullMQ can run (checked in UTC), `fallback` when unset.
 * A fallback is not parsed again at each start: the first parse loads cron-parser and luxon and
 * makes ICU's time zones, ~0.02 s of CPU, a tenth of an `agentdb` command's start. That every
 * fallback parses is checked once, by test/unit/config-schedules.test.ts.
 */
export const cronSetting = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .refine((cron) => cron === fallback || cronError(cron, 'UTC') === undefined, { error: (i) => `not a cron pattern: ${cronError(String(i.input), 'UTC')}` });

/** A schedule's time zone: an IANA name, UTC when unset (not parsed at each start: see {@link cronSetting}). */
export const timeZoneSetting = () =>
  z
    .string()
    .default('UTC')
    .refine((tz) => tz === 'UTC' || cronError('0 0 * * *', tz) === undefined, 'not a time zone (an IANA name such as UTC or Europe/Paris)');
