import type { Database } from 'better-sqlite3';
import type { EffectValue } from '../contracts/effect.ts';
import { nullBindings } from '../guard/engine-check.ts';
import { parseStatement } from '../guard/guard.ts';

// Which values an effect's digest may leave out as made by the clock (see effect-volatile.ts for
// those made by randomness, and the statement's own assignments): a written value that reads as a
// time of the recording's own clock, when the statement can write one at all.

/** Milliseconds of the clock a recording ran in: its start and its end, as Date.now(). */
export interface ClockWindow {
  start: number;
  end: number;
}

/** Slack either side of a window: CURRENT_TIMESTAMP and unixepoch() truncate to the second. */
const SLACK_MS = 1000;

/**
 * True when `v` is a time the clock gave during `w`: a UTC date-time, date or time of day as
 * SQLite's date functions write them (with or without `T`, fraction, `Z`), or a unix time in
 * seconds or milliseconds, or a Julian day number.
 */
export function clockValue(v: EffectValue, w: ClockWindow): boolean {
  const lo = w.start - SLACK_MS;
  const hi = w.end + SLACK_MS;
  const within = (ms: number) => ms >= lo && ms <= hi;
  if (typeof v === 'number') {
    if (Number.isInteger(v)) return within(v * 1000) || within(v);
    return within(v * 1000) || within((v - 2440587.5) * 86400000);
  }
  if (typeof v !== 'string') return false;
  const dateTime = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,3})?)?)Z?$/.exec(v);
  if (dateTime) {
    const ms = Date.parse(`${dateTime[1]}T${dateTime[2]}Z`);
    // A value written to the second (or minute) stands for the whole of it.
    const width = dateTime[2]!.length === 5 ? 60000 : dateTime[2]!.length === 8 ? 1000 : 1;
    return !Number.isNaN(ms) && ms + width > lo && ms <= hi;
  }
  if (/^\d{4}-\d{2}-\d{2}$/.test(v)) {
    const day = Date.parse(`${v}T00:00:00Z`);
    return !Number.isNaN(day) && day + 86400000 > lo && day <= hi;
  }
  const time = /^(\d{2}):(\d{2}):(\d{2})$/.exec(v);
  if (time) {
    const second = Number(time[1]) * 3600 + Number(time[2]) * 60 + Number(time[3]);
    const from = Math.floor(lo / 1000);
    const span = Math.ceil(hi / 1000) - from;
    return span >= 86400 || (((second - (from % 86400)) % 86400) + 86400) % 86400 <= span;
  }
  return false;
}

/** SQLite's date and time functions, by the name EXPLAIN shows a call by (`current_timestamp(0)`). */
const CLOCK_FUNCTIONS = new Set([
  'current_timestamp',
  'current_date',
  'current_time',
  'datetime',
  'date',
  'time',
  'julianday',
  'unixepoch',
  'strftime',
  'timediff',
]);

/**
 * Whether a value `sql` writes can come from the clock: its compiled program calls a date or time
 * function. Views it reads, the DEFAULTs an insert leaves to the table and the foreign-key actions
 * it runs (their subprograms, which EXPLAIN lists after it: a SET DEFAULT's DEFAULT) are compiled
 * in. Only then may a written value that reads as a time of the recording's clock be left out
 * ({@link clockValue}): else a copied INTEGER that reads as unix milliseconds of the window was
 * left out, its value chosen among the window's thousands of milliseconds (session 34, R8's
 * leftover; session 35, R9). True when the program cannot be read, as before.
 */
export function clockWrites(db: Database, sql: string): boolean {
  const parsed = parseStatement(sql);
  if ('ok' in parsed) return true;
  try {
    const ops = db.prepare(`EXPLAIN ${sql.slice(parsed.tokens[0]!.offset)}`).all(...nullBindings(parsed.tokens)) as { opcode: string; p4: unknown }[];
    return ops.some((op) => (op.opcode === 'Function' || op.opcode === 'PureFunc') && CLOCK_FUNCTIONS.has(String(op.p4).replace(/\(.*$/, '')));
  } catch {
    return true;
  }
}
