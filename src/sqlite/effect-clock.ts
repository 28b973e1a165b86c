import type { Database } from 'better-sqlite3';
import type { EffectValue } from '../contracts/effect.ts';
import { nullBindings } from '../guard/engine-check.ts';
import { parseStatement } from '../guard/guard.ts';

// Which values an effect's digest may leave out as made by the clock (see effect-volatile.ts for
// those made by randomness, and the statement's own assignments): a written value that reads as the
// time the statement's run read (or, where that instant is not known, a time of the recording's
// window), when the statement can write one at all, bound to its form.

/**
 * Milliseconds (as Date.now()) the clock a statement read can have been at: the one instant of
 * its run when the recorder read it (`instant`), else its recording's start and end (`window`).
 */
export interface ClockWindow {
  start: number;
  end: number;
}

/**
 * Slack either side of a recording's window: the clock's own granularity. A value written to the
 * second (CURRENT_TIMESTAMP, unixepoch()) stands for the whole second in {@link clockForm}, so the
 * window needs no second either side, which let a CREATE TABLE … AS SELECT that calls the clock
 * have a copied value swapped for any other time of two seconds and more (session 36, R10).
 */
const SLACK_MS = 2;

/** The window of a recording that ran from `start` to `end` (ms, as Date.now()): the run read the clock within it. */
export function recordingWindow(start: number, end: number): ClockWindow {
  return { start: start - SLACK_MS, end: end + SLACK_MS };
}

/**
 * The instant SQLite gave every clock call of the statement's run, from `julianday('now')` read in
 * that run (SQLite keeps the instant as whole milliseconds of the Julian day): SQLite reads the
 * clock once per run of a statement (`sqlite3StmtCurrentTime`), triggers and DEFAULTs included.
 */
export function instant(julianDay: number): ClockWindow | undefined {
  const ms = Math.round((julianDay - 2440587.5) * 86400000);
  return Number.isFinite(ms) ? { start: ms, end: ms } : undefined;
}

/**
 * The form in which `v` is a time the clock can have given in `w`, undefined when it is none: a
 * UTC date-time, date or time of day as SQLite's date functions write them (the text's shape,
 * digits as 9: with or without `T`, fraction, `Z`), or a unix time in seconds or milliseconds, or a
 * Julian day (with SQLite's type, `raw` as it gave the value: integers as bigint). The digest binds
 * that form where it leaves the value out: else a time shown as text could commit as an INTEGER
 * (session 36, R10).
 */
export function clockForm(v: EffectValue, raw: unknown, w: ClockWindow): string | undefined {
  const lo = w.start;
  const hi = w.end;
  // A value standing for [from, from + width) ms that the window meets.
  const meets = (from: number, width: number) => from + width > lo && from <= hi;
  if (typeof v === 'number') {
    const type = typeof raw === 'number' ? 'real' : 'integer';
    // Milliseconds computed through a REAL (julianday() × 86400000) may be one off either way.
    if (Number.isInteger(v)) return meets(v * 1000, 1000) ? `${type}:s` : meets(v - 1, 3) ? `${type}:ms` : undefined;
    return meets(v * 1000 - 1, 2) ? 'real:s' : meets((v - 2440587.5) * 86400000 - 1, 2) ? 'real:jd' : undefined;
  }
  if (typeof v !== 'string') return undefined;
  const form = `text:${v.replace(/\d/g, '9')}`;
  const dateTime = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2}(?:\.(\d{1,3}))?)?)Z?$/.exec(v);
  if (dateTime) {
    const ms = Date.parse(`${dateTime[1]}T${dateTime[2]}Z`);
    // A value written to the minute, second or a fraction of it stands for the whole of it.
    const width = dateTime[2]!.length === 5 ? 60000 : dateTime[3] === undefined ? 1000 : 10 ** (3 - dateTime[3].length);
    return !Number.isNaN(ms) && meets(ms, width) ? form : undefined;
  }
  if (/^\d{4}-\d{2}-\d{2}$/.test(v)) {
    const day = Date.parse(`${v}T00:00:00Z`);
    return !Number.isNaN(day) && meets(day, 86400000) ? form : undefined;
  }
  const time = /^(\d{2}):(\d{2}):(\d{2})$/.exec(v);
  if (time) {
    const second = Number(time[1]) * 3600 + Number(time[2]) * 60 + Number(time[3]);
    const from = Math.floor(lo / 1000);
    const span = Math.floor(hi / 1000) - from;
    return span >= 86400 || (((second - (from % 86400)) % 86400) + 86400) % 86400 <= span ? form : undefined;
  }
  return undefined;
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
 * ({@link clockForm}): else a copied INTEGER that reads as unix milliseconds of the window was
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
