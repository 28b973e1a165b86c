import type { Database } from 'better-sqlite3';
import { quoteIdentifier } from './sqlite-trusted.ts';

/**
 * The temporary log of one table's changes that `EffectRecorder` (sqlite-effect.ts) reads: one
 * entry per row inserted, updated or deleted, holding its key, every column before and after and,
 * for a rowid table, the rowid after (`m`). Filled by temporary AFTER triggers on the table, made
 * and dropped inside the statement's own transaction.
 *
 * One log table held an entry whole: 3 + keys + 2 × columns columns. SQLite allows a table at
 * most 2,000 (SQLITE_MAX_COLUMN), so a table of 999 columns anywhere in the database made every
 * recording fail, "too many columns on _agentdb_fx_1": no write to any of its tables could be
 * previewed, and none approved could run (session 34, R8). So an entry's values are spread over
 * as many log tables as they need, {@link MAX_LOG_VALUES} each (fewer beside a wide key), written by one trigger per
 * operation (one row in each per change, so their `fx_seq` agree) and read back in step.
 */

/** Values (columns before and after, the rowid after) one log table holds besides `fx_seq`, `fx_op` and the key. */
export const MAX_LOG_VALUES = 1000;

/** SQLite's most columns a table may have (SQLITE_MAX_COLUMN of this build), less a margin. */
const MAX_TABLE_COLUMNS = 1990;

/** What one table's log is: its tables and what it records. */
export interface EffectLog {
  /** The log tables, in order; the first is named `name`, the others `name_p1`, `name_p2`, …. */
  parts: string[];
  /** The triggers' names, one per operation. */
  triggers: string[];
  keys: number;
  /** Values each log table holds (the last holds the rest). */
  perPart: number;
  /** Each log table's columns as read back: `fx_seq`, `fx_op`, the key's, its values'. */
  read: string[];
  /** Whether the first log table keeps the instant of the statement's run (`fx_now`). */
  now: boolean;
}

/**
 * Makes the log of `table` (temporary tables and triggers named from `name`, which must be
 * agentdb's own prefix) and its triggers. `key` is what OLD/NEW know the key by; with `rowid`,
 * the rowid after each change is kept as the last value. With `now`, each entry also keeps the
 * instant SQLite gives the statement's clock calls (`logInstant`).
 */
export function installLog(db: Database, name: string, table: string, key: string[], columns: string[], rowid: boolean, now = false): EffectLog {
  const width = columns.length * 2 + (rowid ? 1 : 0);
  // A WITHOUT ROWID table's key may be wide too: every part holds it.
  const perPart = Math.max(1, Math.min(MAX_LOG_VALUES, MAX_TABLE_COLUMNS - key.length));
  const count = Math.max(1, Math.ceil(width / perPart));
  const parts = Array.from({ length: count }, (_, p) => (p === 0 ? name : `${name}_p${p}`));
  const keySlots = key.map((_, i) => `k${i}`);
  const valueSlots = (p: number) => Array.from({ length: Math.min(perPart, width - p * perPart) }, (_, i) => `v${i}`);
  // One exec, no statement objects: each prepared one lives until V8 collects it, and SQLite
  // visits every live statement of the connection at each schema change, so 200 tables' 800
  // statements made each preview slower than the last.
  const ddl: string[] = [];
  const read: string[] = [];
  // The clock a trigger reads is the statement's: SQLite reads it once per run of a statement
  // (sqlite3StmtCurrentTime), for every function of its program and of its triggers' subprograms.
  const nowSlot = (p: number) => (now && p === 0 ? ['fx_now'] : []);
  for (const [p, part] of parts.entries()) {
    const slots = [...keySlots, ...valueSlots(p)];
    read.push(['fx_seq', 'fx_op', ...slots].join(', '));
    ddl.push(
      `CREATE TEMP TABLE temp.${quoteIdentifier(part)}(fx_seq INTEGER PRIMARY KEY, fx_op TEXT${[...slots, ...nowSlot(p)].map((s) => `, ${s}`).join('')});`,
    );
  }
  const on = `main.${quoteIdentifier(table)}`;
  const cols = (side: 'OLD' | 'NEW' | null) => columns.map((c) => (side ? `${side}.${quoteIdentifier(c)}` : 'NULL'));
  const keyOf = (side: 'OLD' | 'NEW') => key.map((k) => `${side}.${quoteIdentifier(k)}`);
  const after = (side: 'NEW' | null) => (rowid ? [side ? `${side}.${quoteIdentifier(key[0]!)}` : 'NULL'] : []);
  const triggers: string[] = [];
  const trigger = (op: 'insert' | 'update' | 'delete', keys: string[], values: string[]) => {
    const inserts = parts.map((part, p) => {
      const slots = [...keySlots, ...valueSlots(p), ...nowSlot(p)];
      const chunk = values.slice(p * perPart, (p + 1) * perPart);
      const clock = now && p === 0 ? [`julianday('now')`] : [];
      return `INSERT INTO temp.${quoteIdentifier(part)}(fx_op${slots.map((s) => `, ${s}`).join('')}) VALUES('${op}', ${[...keys, ...chunk, ...clock].join(', ')});`;
    });
    const triggerName = `${name}_${op}`;
    ddl.push(`CREATE TEMP TRIGGER ${quoteIdentifier(triggerName)} AFTER ${op.toUpperCase()} ON ${on} BEGIN ${inserts.join(' ')} END;`);
    triggers.push(triggerName);
  };
  trigger('insert', keyOf('NEW'), [...cols(null), ...cols('NEW'), ...after(null)]);
  trigger('update', keyOf('OLD'), [...cols('OLD'), ...cols('NEW'), ...after('NEW')]);
  trigger('delete', keyOf('OLD'), [...cols('OLD'), ...cols(null), ...after(null)]);
  db.exec(ddl.join('\n'));
  return { parts, triggers, keys: key.length, perPart, read, now };
}

/** The instant the statement's run read the clock at, as its log kept it (`now`): undefined with no entry. */
export function logInstant(db: Database, log: EffectLog): number | undefined {
  if (!log.now) return undefined;
  return db
    .prepare(`SELECT fx_now FROM temp.${quoteIdentifier(log.parts[0]!)} LIMIT 1`)
    .pluck()
    .get() as number | undefined;
}

/** Entries per operation. */
export function logCounts(db: Database, log: EffectLog): { insert: number; update: number; delete: number } {
  const counts = { insert: 0, update: 0, delete: 0 };
  const rows = db.prepare(`SELECT fx_op, count(*) AS n FROM temp.${quoteIdentifier(log.parts[0]!)} GROUP BY fx_op`).all() as {
    fx_op: keyof typeof counts;
    n: number;
  }[];
  for (const { fx_op, n } of rows) counts[fx_op] = n;
  return counts;
}

/**
 * Every entry as `[fx_seq, fx_op, ...key, ...values]` (values: columns before, columns after, the
 * rowid after), sorted by `order` (an ORDER BY over `fx_op`, `k<i>` and `fx_seq`). Each part is
 * read in that order, which `fx_seq` makes total, so their rows line up.
 */
export function* logEntries(db: Database, log: EffectLog, order: string): Generator<unknown[]> {
  const cursors = log.parts.map((part, p) =>
    (
      db
        .prepare(`SELECT ${log.read[p]} FROM temp.${quoteIdentifier(part)} ORDER BY ${order}`)
        .raw(true)
        .safeIntegers(true)
        .iterate() as IterableIterator<unknown[]>
    )[Symbol.iterator](),
  );
  const skip = 2 + log.keys;
  try {
    for (;;) {
      const first = cursors[0]!.next();
      if (first.done) return;
      const entry = [...first.value];
      for (const cursor of cursors.slice(1)) entry.push(...(cursor.next().value as unknown[]).slice(skip));
      yield entry;
    }
  } finally {
    // An open cursor keeps the connection busy: close every one, however reading ended.
    for (const cursor of cursors) cursor.return?.();
  }
}

/**
 * The bytes (hex) of value `at` of entry `fxSeq` (`at` counts the key first, then the values, as
 * {@link logEntries} gives them): what a text that is not valid UTF-8 really holds.
 */
export function logHex(db: Database, log: EffectLog, fxSeq: unknown, at: number): string {
  const value = at - log.keys;
  const part = value < 0 ? 0 : Math.floor(value / log.perPart);
  const slot = value < 0 ? `k${at}` : `v${value % log.perPart}`;
  return db
    .prepare(`SELECT hex(${slot}) FROM temp.${quoteIdentifier(log.parts[part]!)} WHERE fx_seq = ?`)
    .pluck()
    .get(fxSeq) as string;
}

/** Drops the triggers and the log tables. */
export function dropLog(db: Database, log: EffectLog): void {
  db.exec(
    [...log.triggers.map((t) => `DROP TRIGGER temp.${quoteIdentifier(t)};`), ...log.parts.map((p) => `DROP TABLE temp.${quoteIdentifier(p)};`)].join('\n'),
  );
}
