import type { Database } from 'better-sqlite3';
import { AgentDbError } from '../errors.ts';
import { quoteIdentifier, trusted } from './sqlite-trusted.ts';

// What a DROP TABLE does to other tables. With foreign keys on (better-sqlite3 builds SQLite
// with SQLITE_DEFAULT_FOREIGN_KEYS=1), DROP TABLE first deletes the table's rows as DELETE
// would, and the ON DELETE actions of tables that refer to it run: CASCADE deletes their rows,
// SET NULL and SET DEFAULT change them. A drop is approved as "this table, N rows" (dropEffect);
// those other rows were never shown to the person, nor bound (session 32, R5). Used by `drop`
// (sqlite-drop.ts), inside its transaction.

/** Other tables whose foreign keys to `table` change their rows when its rows are deleted. */
const REFERRERS = `SELECT DISTINCT s.name FROM main.sqlite_schema AS s, pragma_foreign_key_list(s.name, 'main') AS f
  WHERE s.type = 'table' AND s.name <> ? AND f."table" = ? COLLATE NOCASE AND f.on_delete IN ('CASCADE', 'SET NULL', 'SET DEFAULT')`;

/** Prefix of the temporary triggers that stop a drop reaching other tables (agents make no temp objects). */
const STOP_PREFIX = '_agentdb_drop_stop_';
/** The RAISE message those triggers abort with, told apart from any other failure of the DROP. */
const STOPPED = 'agentdb: the drop would change rows of another table';

/**
 * Runs `dropIt` (the DROP TABLE of `table`) and throws DROP_CASCADES, the DROP undone, when a
 * foreign-key action would delete or change a row of another table. SQLite itself tells: for the
 * DROP's duration, each table that refers to `table` with an action carries temporary AFTER
 * DELETE and AFTER UPDATE triggers (foreign-key actions fire triggers) that abort the statement
 * at the first such row. Rows of `table` itself (a self-reference) are its own to lose. Made on
 * the trusted side inside the caller's transaction and dropped before it ends; nothing is made
 * when no table refers to `table` with an action.
 */
export function dropChangingNothingElse(db: Database, table: string, dropIt: () => void): void {
  const referrers = trusted(db, REFERRERS).pluck().all(table, table) as string[];
  if (referrers.length === 0) {
    dropIt();
    return;
  }
  const made: string[] = [];
  try {
    referrers.forEach((referrer, i) => {
      for (const op of ['DELETE', 'UPDATE']) {
        const name = `${STOP_PREFIX}${i}_${op.toLowerCase()}`;
        db.prepare(
          `CREATE TEMP TRIGGER ${quoteIdentifier(name)} AFTER ${op} ON main.${quoteIdentifier(referrer)} BEGIN SELECT RAISE(ABORT, '${STOPPED}'); END`,
        ).run();
        made.push(name);
      }
    });
    try {
      dropIt();
    } catch (err) {
      if (!(err instanceof Error) || !err.message.includes(STOPPED)) throw err;
      const names = referrers.map((n) => JSON.stringify(n)).join(', ');
      // Its own code (was SQL_REFUSED, whose hint says "drops use DATA_DROP_TABLE", the tool the
      // agent used): the statement is allowed, the rows referring to the table are in the way.
      throw new AgentDbError(
        'DROP_CASCADES',
        `dropping ${JSON.stringify(table)} would also delete or change rows of ${names} that refer to it through their foreign keys (ON DELETE CASCADE, SET NULL or SET DEFAULT), which a drop neither shows nor asks about. Delete those rows, or set their reference to NULL, with DATA_WRITE_SQL (or drop ${names}) first, then drop ${JSON.stringify(table)} again. Nothing was dropped.`,
      );
    }
  } finally {
    for (const name of made) db.prepare(`DROP TRIGGER IF EXISTS temp.${quoteIdentifier(name)}`).run();
  }
}

/**
 * For the check a drop takes before it is parked for a person: the drop tried in a transaction
 * that is always rolled back, so that a drop that would change other tables' rows is refused
 * before anyone is asked about it (and again when it runs, since rows may refer to it by then).
 * Nothing is tried when no table refers to `table` with an action.
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
