import type { Database } from 'better-sqlite3';
import { AgentDbError } from '../errors.ts';
import { quoteIdentifier, trusted } from './sqlite-trusted.ts';

// What a DROP TABLE does to other tables. With foreign keys on (better-sqlite3 builds SQLite
// with SQLITE_DEFAULT_FOREIGN_KEYS=1), DROP TABLE first deletes the table's rows as DELETE
// would, and the ON DELETE actions of tables that refer to it run: CASCADE deletes their rows,
// SET NULL and SET DEFAULT change them. A drop is approved as "this table, N rows" (dropEffect);
// those other rows were never shown to the person, nor bound (session 32, R5). Rows referring
// to it under NO ACTION or RESTRICT (a bare REFERENCES) make the DROP fail instead: such a drop
// was parked, approved, and then answered "FOREIGN KEY constraint failed" (session 32, R6).
// Used by `drop` (sqlite-drop.ts), inside its transaction.

/** Other tables with a foreign key to `table` (`?` twice); `actions` keeps those with an ON DELETE action. */
const referrers = (actions: boolean) => `SELECT DISTINCT s.name FROM main.sqlite_schema AS s, pragma_foreign_key_list(s.name, 'main') AS f
  WHERE s.type = 'table' AND s.name <> ? AND f."table" = ? COLLATE NOCASE${actions ? ` AND f.on_delete IN ('CASCADE', 'SET NULL', 'SET DEFAULT')` : ''}`;
const REFERRERS = referrers(false);
const ACTING_REFERRERS = referrers(true);

/** Prefix of the temporary triggers that stop a drop reaching other tables (agents make no temp objects). */
const STOP_PREFIX = '_agentdb_drop_stop_';
/** The RAISE message those triggers abort with, told apart from any other failure of the DROP. */
const STOPPED = 'agentdb: the drop would change rows of another table';

/**
 * Runs `dropIt` (the DROP TABLE of `table`) and throws DROP_REFERENCED, the DROP undone, when a
 * row of another table refers to it: a foreign-key action would delete or change that row, or
 * (NO ACTION, RESTRICT) the DROP fails on it. SQLite itself tells: for the DROP's duration, each
 * table that refers to `table` with an action carries temporary AFTER DELETE and AFTER UPDATE
 * triggers (foreign-key actions fire triggers) that abort the statement at the first such row;
 * the others fail it as a foreign key constraint. Rows of `table` itself (a self-reference) are
 * its own to lose. Made on the trusted side inside the caller's transaction and dropped before
 * it ends; nothing is made when no table refers to `table` with an action.
 */
export function dropChangingNothingElse(db: Database, table: string, dropIt: () => void): void {
  const all = trusted(db, REFERRERS).pluck().all(table, table) as string[];
  if (all.length === 0) {
    dropIt();
    return;
  }
  const acting = trusted(db, ACTING_REFERRERS).pluck().all(table, table) as string[];
  const made: string[] = [];
  try {
    acting.forEach((referrer, i) => {
      for (const op of ['DELETE', 'UPDATE']) {
        const name = `${STOP_PREFIX}${i}_${op.toLowerCase()}`;
        db.prepare(
          `CREATE TEMP TRIGGER ${quoteIdentifier(name)} AFTER ${op} ON main.${quoteIdentifier(referrer)} BEGIN SELECT RAISE(ABORT, '${STOPPED}'); END`,
        ).run();
        made.push(name);
      }
    });
    let broken: string[];
    try {
      dropIt();
      // A DEFERRABLE INITIALLY DEFERRED key fails only at COMMIT, after the drop was answered
      // for (and its check, rolled back, passed): its rows still naming the table tell now.
      broken = all.filter((r) => trusted(db, `SELECT 1 FROM pragma_foreign_key_check(?, 'main') WHERE parent = ? COLLATE NOCASE LIMIT 1`).get(r, table));
    } catch (err) {
      if (err instanceof Error && err.message.includes(STOPPED)) throw referenced(table, acting, 'change');
      if (foreignKeyFailed(err)) throw referenced(table, all, 'break');
      throw err;
    }
    if (broken.length > 0) throw referenced(table, broken, 'break');
  } finally {
    for (const name of made) db.prepare(`DROP TRIGGER IF EXISTS temp.${quoteIdentifier(name)}`).run();
  }
}

/**
 * The refusal, naming the referring tables. Its own code, not SQL_REFUSED (whose hint says
 * "drops use DATA_DROP_TABLE", the tool the agent used): the statement is allowed, the rows
 * referring to the table are in the way.
 */
function referenced(table: string, referrers: string[], how: 'change' | 'break'): AgentDbError {
  const names = referrers.map((n) => JSON.stringify(n)).join(', ');
  const would =
    how === 'change'
      ? 'also delete or change those rows (ON DELETE CASCADE, SET NULL or SET DEFAULT), which a drop neither shows nor asks about'
      : 'break them (ON DELETE NO ACTION or RESTRICT), which SQLite refuses';
  return new AgentDbError(
    'DROP_REFERENCED',
    `rows of ${names} refer to ${JSON.stringify(table)} through their foreign keys: dropping it would ${would}. Delete those rows, or set their reference to NULL, with DATA_WRITE_SQL (or drop ${names}) first, then drop ${JSON.stringify(table)} again. Nothing was dropped.`,
  );
}

/** SQLite's failure of an immediate foreign key: NO ACTION (…_FOREIGNKEY) or RESTRICT (…_TRIGGER). */
function foreignKeyFailed(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return err instanceof Error && typeof code === 'string' && code.startsWith('SQLITE_CONSTRAINT') && err.message === 'FOREIGN KEY constraint failed';
}

/**
 * For the check a drop takes before it is parked for a person: the drop tried in a transaction
 * that is always rolled back, so that a drop that rows of other tables refer to is refused
 * before anyone is asked about it (and again when it runs, since rows may refer to it by then).
 * Nothing is tried when no table refers to `table`.
 */
export function tryDropAlone(db: Database, found: { type: 'table' | 'view'; name: string }): void {
  if (found.type !== 'table' || (trusted(db, REFERRERS).pluck().all(found.name, found.name) as string[]).length === 0) return;
  trusted(db, 'BEGIN IMMEDIATE').run();
  try {
    dropChangingNothingElse(db, found.name, () => db.prepare(`DROP TABLE main.${quoteIdentifier(found.name)}`).run());
  } finally {
    if (db.inTransaction) trusted(db, 'ROLLBACK').run();
  }
}
