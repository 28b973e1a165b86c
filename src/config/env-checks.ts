// What the parts of the environment's schema (src/config/*.ts) check alike: bounded integers,
// cron patterns and time zones as BullMQ will read them, comma-separated lists.

import cronParser from 'cron-parser';
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
    // A bad time zone only shows when a date is computed.
    cronParser.parseExpression(pattern, { tz }).next();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}
