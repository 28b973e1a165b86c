import { createHash } from 'node:crypto';
import type { Database } from 'better-sqlite3';
import type { Effect, EffectLimits, EffectRow, EffectTable, EffectValue } from '../contracts/effect.ts';
import { AgentDbError } from '../errors.ts';
import { targetTable } from '../guard/target-table.ts';
import { asciiLower } from '../guard/tokenizer.ts';
import { madeNames, ShownRows } from './effect-cut.ts';
import { dropLog, type EffectLog, installLog, logCounts, logEntries, logHex, logInstant } from './effect-log.ts';
import { clockForm, clockWrites, instant, recordingWindow } from './effect-clock.ts';
import { actionColumns, namedColumns, volatileAssignments, volatileDefault } from './effect-volatile.ts';
import { watchedTables } from './written-tables.ts';
import { trusted } from './sqlite-trusted.ts';
import { effectValue, exactValue } from './effect-exact.ts';

/** Prefix of the temporary tables and triggers that record an effect (agents make no temp objects). */
const FX_PREFIX = '_agentdb_fx_';

interface Watched {
  table: string;
  columns: string[];
  /** Key columns as read from OLD/NEW: a rowid alias, or a WITHOUT ROWID table's primary key. */
  key: string[];
  log: string;
  /** The log's tables and triggers, once installed. */
  installed?: EffectLog;
  /**
   * Per column, then per key column: whether an inserted row's value there is made as the row is
   * inserted and the statement does not name the column — a volatile DEFAULT (CURRENT_TIMESTAMP,
   * randomblob()), or the rowid SQLite assigns.
   */
  madeOnInsert: boolean[];
  keyMadeOnInsert: boolean[];
  /** Per column: whether the statement sets it, in every row it updates, to a value of only the clock and randomness. */
  madeByStatement: boolean[];
  /** The columns left out of inserted rows for their volatile DEFAULT, each with that DEFAULT's text. */
  madeByDefault: [string, string][];
  /** A rowid table: an update may move its rowid, which (but for an INTEGER PRIMARY KEY) no column shows. */
  rowid: boolean;
  /** Its rowid is a column of no name (no INTEGER PRIMARY KEY): a move is shown in `after` under the key's name. */
  hiddenRowid: boolean;
}

/** A value the digest leaves out, in its place: made by the clock, or as the row was inserted. */
const VOLATILE = { $volatile: true };

/**
 * Records, while installed, every row an agent statement inserts, updates or deletes in the
 * database's agent tables, with the values before and after.
 *
 * How: temporary triggers (AFTER INSERT/UPDATE/DELETE on each agent table) that copy OLD and
 * NEW into a temporary log per table (effect-log.ts). They are made here, on the trusted side, inside the
 * statement's own transaction and gone with it; agents still may not create triggers (the guard
 * and the schema check refuse them). Not the session extension: better-sqlite3 does not expose
 * sqlite3session, and a changeset holds only a row's changed columns, not a person-readable
 * before and after. `recursive_triggers` is on while recording, so that rows an `INSERT OR
 * REPLACE` deletes are recorded too (SQLite fires delete triggers for them only then).
 *
 * Limits: a table the statement itself creates (CREATE TABLE … AS SELECT) has no trigger: its
 * rows are read once it ran, by `CreatedRows` (created-rows.ts); virtual tables take no triggers.
 */
export class EffectRecorder {
  private readonly watched: Watched[] = [];
  private readonly recursive: number;
  private readonly started = Date.now();
  /** Whether a value it writes can come from the clock (`clockWrites`): else no value is left out as a time. */
  private readonly clock: boolean;

  /**
   * Installs the triggers; the caller's transaction must be open and must end after {@link remove}.
   * `sql` is the statement to be recorded: the columns it names are bound whatever their default.
   */
  constructor(
    private readonly db: Database,
    sql: string,
  ) {
    const named = namedColumns(sql);
    // Names as SQLite folds them, ASCII only: JavaScript's toLowerCase folds the Kelvin sign to `k`,
    // and a column "\u212A" set from another table's data took the `k = random()` beside it for
    // its own, left out of the digest (session 35, R9).
    const targetName = targetTable(sql);
    const target = targetName === undefined ? undefined : asciiLower(targetName);
    const assigned = volatileAssignments(sql);
    const isNamed = (c: string) => named.all || named.spelled.has(c.toLowerCase());
    const rowidSpelled = ['rowid', '_rowid_', 'oid'].some((n) => named.spelled.has(n));
    this.recursive = trusted(db, 'PRAGMA recursive_triggers').pluck().get() as number;
    // Only the tables the statement can change (written-tables.ts): the others would cost a log each and record nothing.
    const tables = watchedTables(db, sql);
    tables.forEach(({ name, wr, pkIndex }, i) => {
      const cols = trusted(db, `SELECT name, pk, type, dflt_value, hidden FROM pragma_table_xinfo(?, 'main') WHERE hidden IN (0, 2, 3) ORDER BY cid`).all(
        name,
      ) as {
        name: string;
        pk: number;
        hidden: number;
        type: string;
        dflt_value: string | null;
      }[];
      const columns = cols.map((c) => c.name);
      const key = wr
        ? cols
            .filter((c) => c.pk > 0)
            .sort((a, b) => a.pk - b.pk)
            .map((c) => c.name)
        : [rowidName(columns)];
      // SQLite assigns the rowid (and its INTEGER PRIMARY KEY alias) of a row inserted without
      // one: another insert approved meanwhile moves it, and nobody chose it.
      const pks = cols.filter((c) => c.pk > 0);
      // A rowid table's PRIMARY KEY that is no alias has an index of its own: `id INTEGER PRIMARY
      // KEY DESC` (SQLite's documented quirk) is an ordinary column, which an insert not naming it
      // gives its DEFAULT, chosen text that was left out as if SQLite had assigned it (session 35, R9).
      const alias = !wr && pkIndex === 0 && pks.length === 1 && pks[0]!.type.toUpperCase() === 'INTEGER' ? pks[0]!.name : undefined;
      // An INSERT without a column list gives the alias a value by position: NULL is assigned.
      const aliasAt = cols.filter((c) => c.hidden === 0).findIndex((c) => c.name === alias);
      const aliasGiven = alias !== undefined && (named.all ? !named.nullAt.has(aliasAt) : named.spelled.has(alias.toLowerCase()));
      const rowidAssigned = !wr && !rowidSpelled && !aliasGiven;
      // Only the table the statement writes takes its assignments (a foreign-key action's rows are
      // bound), its inserted rows those of its VALUES, its updated rows those of its SET, but for a
      // column an action of its own foreign keys may write (its rows referring to rows it changes).
      const isTarget = asciiLower(name) === target;
      const actions = isTarget && assigned.updated.size > 0 ? actionColumns(db, name) : new Set<string>();
      const insertedByStatement = cols.map((c) => isTarget && assigned.inserted.has(asciiLower(c.name)));
      const madeByStatement = cols.map((c) => isTarget && assigned.updated.has(asciiLower(c.name)) && !actions.has(asciiLower(c.name)));
      const byDefault = cols.map((c, j) => !insertedByStatement[j] && c.name !== alias && volatileDefault(c.dflt_value) && !isNamed(c.name));
      const madeOnInsert = cols.map((c, j) => insertedByStatement[j] || (c.name === alias ? rowidAssigned : byDefault[j]!));
      const madeByDefault = cols.filter((_, j) => byDefault[j]).map((c): [string, string] => [c.name, c.dflt_value!]);
      const keyMadeOnInsert = wr
        ? key.map((k) => madeOnInsert[columns.indexOf(k)] ?? false)
        : [rowidAssigned || (alias !== undefined && insertedByStatement[columns.indexOf(alias)]!)];
      this.watched.push({
        table: name,
        columns,
        key,
        log: `${FX_PREFIX}${i}`,
        madeOnInsert,
        keyMadeOnInsert,
        madeByStatement,
        madeByDefault,
        rowid: !wr,
        hiddenRowid: !wr && alias === undefined,
      });
    });
    // Before the triggers exist: their programs are no part of the statement's.
    this.clock = clockWrites(db, sql);
    db.prepare('PRAGMA recursive_triggers = ON').run();
    try {
      for (const w of this.watched) this.install(w);
    } catch (err) {
      // The caller's rollback takes what was installed; the pragma it must be told.
      this.restorePragma();
      throw err;
    }
  }

  private install(w: Watched): void {
    // A rowid table's log also keeps the rowid a row has after the change: an UPDATE that sets
    // `rowid` changes no column, and its new rowid was neither shown nor bound (session 34, R8).
    w.installed = installLog(this.db, w.log, w.table, w.key, w.columns, w.rowid, this.clock);
  }

  /**
   * The effect recorded so far: counts and a digest over every row (see `Effect.digest`), in a
   * canonical order (table, operation, key, then the order SQLite made the changes), and the
   * rows `limits` keep.
   */
  read(limits: EffectLimits): Effect {
    // The one instant the run read the clock at, as the log kept it: a time is left out only as that
    // instant (any of the window's was, a copied one too: session 36, R10).
    const kept = this.clock ? this.watched.map((w) => logInstant(this.db, w.installed!)).find((v) => v !== undefined) : undefined;
    const clock = (kept === undefined ? undefined : instant(kept)) ?? recordingWindow(this.started, Date.now());
    const hash = createHash('sha256');
    const tables: EffectTable[] = [];
    const shown = new ShownRows(limits);
    for (const w of this.watched) {
      const counts = logCounts(this.db, w.installed!);
      if (counts.insert + counts.update + counts.delete === 0) continue;
      const entry = { table: w.table, inserted: counts.insert, updated: counts.update, deleted: counts.delete };
      tables.push(entry);
      hash.update(JSON.stringify(['table', entry.table, w.columns, entry.inserted, entry.updated, entry.deleted]));
      // A value left out for its DEFAULT is bound to that DEFAULT: the person saw what it made (a
      // time), and a table made again between the approval and the run with the same columns but
      // `DEFAULT (strftime('anything', 'now'))` would otherwise write text nobody was shown. Only
      // where such a value is left out, so other digests (and approvals parked before) stay as they were.
      if (entry.inserted > 0 && w.madeByDefault.length > 0) hash.update(JSON.stringify(['defaults', w.madeByDefault]));
      // Inserted rows whose key SQLite made are in the order it made them: their keys may differ.
      const order = ['fx_op', ...w.key.map((_, i) => (w.keyMadeOnInsert[i] ? `CASE fx_op WHEN 'insert' THEN NULL ELSE k${i} END` : `k${i}`)), 'fx_seq'].join(
        ', ',
      );
      const nk = w.key.length;
      const nc = w.columns.length;
      for (const raw of logEntries(this.db, w.installed!, order)) {
        const op = raw[1] as EffectRow['op'];
        const whole = raw.slice(2).map(effectValue);
        const keyValues = whole.slice(0, nk);
        const before = op === 'insert' ? null : whole.slice(nk, nk + nc);
        const after = op === 'delete' ? null : whole.slice(nk + nc, nk + 2 * nc);
        // The rowid an update moved the row to, when it moved it: bound, and shown when no column holds it.
        const movedTo = op === 'update' && w.rowid && !sameValue(whole[nk + 2 * nc]!, keyValues[0]!) ? whole[nk + 2 * nc]! : undefined;
        // What a change removes or overwrites is bound exactly; what it writes too, but for values
        // made as it runs (effect-volatile.ts), VOLATILE in the preview and the run alike. Never a
        // NULL (it may mean "not yet"); the clock's test only on a cell the row changed (one left
        // as it was is bound by its before value, and may be a time of one window, not the other).
        const made = (values: EffectValue[], onInsert: boolean[], at: number) =>
          values.map((v, i) => {
            if (v === null) return v;
            if (op === 'insert' ? onInsert[i] : w.madeByStatement[i]) return at === 0 && w.rowid ? VOLATILE : madeValue(raw[2 + at + i]);
            const form = this.clock && (op === 'insert' || !sameValue(v, before![i]!)) ? clockForm(v, raw[2 + at + i], clock) : undefined;
            return form === undefined ? v : { ...VOLATILE, clock: form }; // bound to its form: text shown never commits as an INTEGER
          });
        // Values that read alike but are not the same are bound as what they are (`exactValue`);
        // a text's bad bytes are read from the log.
        const exact = (values: unknown[], at: number) =>
          values.map((v, i) => exactValue(v, raw[2 + at + i], () => logHex(this.db, w.installed!, raw[0], at + i)));
        const madeKey = op === 'insert' ? made(keyValues, w.keyMadeOnInsert, 0) : keyValues;
        const madeAfter = after && made(after, w.madeOnInsert, nk + nc);
        const bound = [op, exact(madeKey, 0), before && exact(before, nk), madeAfter && exact(madeAfter, nk + nc)];
        // Only a row that moved adds its new rowid: every other row's digest is as it was.
        hash.update(JSON.stringify(movedTo === undefined ? bound : [...bound, { movedTo }]));
        if (shown.full) continue;
        const row: EffectRow = {
          table: w.table,
          op,
          key: named(w.key, keyValues),
          before: before && named(w.columns, before),
          after: after && named(w.columns, after),
        };
        if (movedTo !== undefined && w.hiddenRowid && row.before && row.after) {
          row.before[w.key[0]!] = keyValues[0]!;
          row.after[w.key[0]!] = movedTo;
        }
        // What a person must not take for what commits: the preview's rowid, its times, its randomness.
        const madeAtRun = [...madeNames(w.key, madeKey), ...(madeAfter ? madeNames(w.columns, madeAfter) : [])];
        if (madeAtRun.length > 0) row.madeAtRun = [...new Set(madeAtRun)];
        shown.add(row);
      }
    }
    return { tables, rows: shown.rows, cut: shown.cut, digest: hash.digest('hex') };
  }

  /** Drops the triggers and logs, in the same transaction, before it commits. */
  remove(): void {
    for (const w of this.watched) if (w.installed) dropLog(this.db, w.installed);
  }

  /** Sets `recursive_triggers` back: a pragma outlives the transaction's rollback. */
  restorePragma(): void {
    this.db.prepare(`PRAGMA recursive_triggers = ${this.recursive ? 'ON' : 'OFF'}`).run();
  }
}

/** The effect of a statement that changes no rows (DDL: its change is the statement itself). */
export const NO_ROWS_EFFECT: Effect = Object.freeze({ tables: [], rows: [], cut: false, digest: createHash('sha256').digest('hex') }) as Effect;

/**
 * An approved write whose effect is no longer the approved one: nothing committed. Carries the
 * effect it would have had now, so that the call can be parked again with it.
 */
export class EffectChanged extends AgentDbError {
  constructor(readonly effect: Effect) {
    super('APPROVAL_STALE', 'the data changed after the approval: the write would now have another effect, and nothing was written');
  }
}

/**
 * A value left out as made as the statement ran, bound to the storage class SQLite gave it: what
 * the clock or randomness makes is not known, but what the column's affinity makes of it is. Left
 * out whole, `SET code = strftime('007', 'now')` shown as the text '007' committed the INTEGER 7
 * once the table was made again meanwhile with `code INTEGER` (R9's constant, in a clock's guise),
 * and `random()` shown as an INTEGER committed text. Text stays `VOLATILE` as it was, so the digests
 * of the commonest such values (CURRENT_TIMESTAMP, hex(randomblob(…))) are unchanged (session 37, R11).
 */
function madeValue(raw: unknown): { $volatile: boolean; type?: string } {
  const type = typeof raw === 'bigint' ? 'integer' : typeof raw === 'number' ? 'real' : typeof raw === 'string' ? 'text' : 'blob';
  return type === 'text' ? VOLATILE : { ...VOLATILE, type };
}

/** The name OLD/NEW know a rowid table's rowid by: the first of its aliases no column shadows. */
function rowidName(columns: string[]): string {
  const taken = new Set(columns.map((c) => c.toLowerCase()));
  return ['rowid', '_rowid_', 'oid'].find((n) => !taken.has(n)) ?? columns[0]!;
}

function sameValue(a: EffectValue, b: EffectValue): boolean {
  return a === b || (typeof a === 'object' && typeof b === 'object' && JSON.stringify(a) === JSON.stringify(b));
}

function named(names: string[], values: EffectValue[]): Record<string, EffectValue> {
  const out: Record<string, EffectValue> = {};
  names.forEach((n, i) => {
    out[n] = values[i] ?? null;
  });
  return out;
}
