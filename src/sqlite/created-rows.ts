import { createHash } from 'node:crypto';
import type { Database } from 'better-sqlite3';
import type { Effect, EffectLimits, EffectValue } from '../contracts/effect.ts';
import { madeNames, ShownRows } from './effect-cut.ts';
import { clockForm, clockWrites, recordingWindow } from './effect-clock.ts';
import { volatileCreatedColumns } from './select-volatile.ts';
import { NO_ROWS_EFFECT } from './sqlite-effect.ts';
import { effectValue, exactValue } from './effect-exact.ts';
import { AGENT_OBJECTS } from './sqlite-schema.ts';
import { quoteIdentifier, trusted } from './sqlite-trusted.ts';

// The effect of a CREATE TABLE … AS SELECT: the rows the new table is made with. DDL changes no
// existing row, so its effect was empty (NO_ROWS_EFFECT) and an approved CTAS copied whatever
// its SELECT read at the run, data changed since the approval included (session 32, R5). The
// EffectRecorder's triggers cannot watch a table that does not exist yet; this reads the tables
// that appeared, after the statement ran, in the same transaction. A CREATE TABLE with no rows
// keeps the empty effect and its digest, so approvals parked before stay valid. A result column
// of only the clock and randomness (`random() AS r`) is left out of the digest as a write's SET
// of them is: bound, a CTAS selecting random() made new rows at each run and was asked again
// every time it was approved (session 32, R6); also when read through a CTE or a subquery
// (select-volatile.ts, session 33, R7).

/** A value the digest leaves out: the rowid SQLite assigned, or a time of the recording's clock. */
const VOLATILE = { $volatile: true };

const AGENT_TABLES = `SELECT name FROM main.sqlite_schema WHERE type = 'table' AND ${AGENT_OBJECTS}`;

/** The agent tables that exist when made; {@link read} gives the rows of those made since. */
export class CreatedRows {
  private readonly before: Set<string>;
  private readonly started = Date.now();
  /** Positions of the result columns the statement makes of only the clock and randomness. */
  private readonly volatile: Set<number>;
  /** Whether a value it writes can come from the clock (`clockWrites`): else no value is left out as a time. */
  private readonly clock: boolean;

  /** `sql` is the CREATE TABLE about to run. */
  constructor(
    private readonly db: Database,
    sql: string,
  ) {
    this.volatile = volatileCreatedColumns(db, sql);
    this.clock = clockWrites(db, sql);
    this.before = new Set(trusted(db, AGENT_TABLES).pluck().all() as string[]);
  }

  /** Every row of every table made since, as inserts (digest over all of them, rows as `limits` keep). */
  read(limits: EffectLimits): Effect {
    // No trigger can read the instant the run read the clock at (the table is made by the statement):
    // a time of the recording's window is left out, bound to its form.
    const clock = recordingWindow(this.started, Date.now());
    const made = (trusted(this.db, AGENT_TABLES).pluck().all() as string[]).filter((n) => !this.before.has(n)).sort();
    const hash = createHash('sha256');
    const tables: Effect['tables'] = [];
    const shown = new ShownRows(limits);
    for (const table of made) {
      const columns = (
        trusted(this.db, `SELECT name FROM pragma_table_xinfo(?, 'main') WHERE hidden IN (0, 2, 3) ORDER BY cid`).all(table) as { name: string }[]
      ).map((c) => c.name);
      const n = Number(
        this.db
          .prepare(`SELECT count(*) FROM main.${quoteIdentifier(table)}`)
          .pluck()
          .get(),
      );
      if (n === 0) continue;
      tables.push({ table, inserted: n, updated: 0, deleted: 0 });
      hash.update(JSON.stringify(['table', table, columns, n, 0, 0]));
      const list = columns.map(quoteIdentifier).join(', ');
      const stmt = this.db
        .prepare(`SELECT rowid, ${list} FROM main.${quoteIdentifier(table)} ORDER BY rowid`)
        .raw(true)
        .safeIntegers(true);
      for (const raw of stmt.iterate() as Iterable<unknown[]>) {
        const values = raw.map(effectValue);
        const after = values.slice(1);
        // Values that read alike but are not the same are bound as what they are (as in sqlite-effect.ts).
        const exact = (v: EffectValue, i: number) =>
          exactValue(v, raw[i + 1], () =>
            this.db
              .prepare(`SELECT hex(${quoteIdentifier(columns[i]!)}) FROM main.${quoteIdentifier(table)} WHERE rowid = ?`)
              .pluck()
              .get(raw[0]),
          );
        const bound = after.map((v, i) => {
          if (v === null) return v;
          if (this.volatile.has(i)) return VOLATILE;
          const form = this.clock ? clockForm(v, raw[i + 1], clock) : undefined;
          return form === undefined ? exact(v, i) : { ...VOLATILE, clock: form };
        });
        hash.update(JSON.stringify(['insert', [VOLATILE], null, bound]));
        if (shown.full) continue;
        const madeAtRun = ['rowid', ...madeNames(columns, bound)];
        shown.add({ table, op: 'insert', key: { rowid: values[0]! }, before: null, after: named(columns, after), madeAtRun });
      }
    }
    if (tables.length === 0) return NO_ROWS_EFFECT;
    return { tables, rows: shown.rows, cut: shown.cut, digest: hash.digest('hex') };
  }
}

function named(names: string[], values: EffectValue[]): Record<string, EffectValue> {
  const out: Record<string, EffectValue> = {};
  names.forEach((n, i) => {
    out[n] = values[i] ?? null;
  });
  return out;
}
