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
//
// Both were told by trying the DROP (R5's temporary triggers, R6's trial before parking), and
// that DELETE is slow: for each row of the dropped table SQLite looks for the rows of every
// referring table that name it, and when the referring column's affinity is not the key's
// (`pid REFERENCES p(id)` with no type, or TEXT against an INTEGER key) its index cannot serve
// that lookup, so each row scans the whole referring table: 20,000 × 20,000 rows took 12-20 s,
// an index on it or not (session 33, R7). So the rows are looked at directly instead, and the
// DROP runs with foreign keys off: it then deletes no rows first, so no action can run at all.
// Used by `drop` (sqlite-drop.ts) in its transaction and by the check before a person is asked.

/** Each foreign key of another table that refers to `table` (`?` twice): its table, columns and ON DELETE action. */
const REFERRING_KEYS = `SELECT s.name AS referrer, f.id AS id, group_concat(f."from", char(0)) AS columns, f.on_delete AS onDelete
  FROM main.sqlite_schema AS s, pragma_foreign_key_list(s.name, 'main') AS f
  WHERE s.type = 'table' AND s.name <> ? AND f."table" = ? COLLATE NOCASE GROUP BY s.name, f.id ORDER BY s.name, f.id`;

interface ReferringKey {
  referrer: string;
  id: number;
  columns: string;
  onDelete: string;
}

const ACTIONS = new Set(['CASCADE', 'SET NULL', 'SET DEFAULT']);

/**
 * Refuses, DROP_REFERENCED, a drop of `table` while a row of another table refers to it: a row
 * whose foreign key to it has no NULL column. SQLite's own rule, as `pragma_foreign_key_check`
 * tells it once the table is gone: such a row either names a row of `table`, which the DROP
 * would delete or change (an ON DELETE action) or fail on (NO ACTION, RESTRICT, or a deferred key
 * at COMMIT), or names none, and would be left naming a table that no longer exists (which the
 * DROP with foreign keys on also refused, since session 32). A self-reference is the table's own
 * to lose. One scan of each referring table, stopping at its first such row: no DROP is tried.
 * @throws AgentDbError DROP_REFERENCED naming the referring tables.
 */
export function refuseReferencedDrop(db: Database, table: string): void {
  const keys = trusted(db, REFERRING_KEYS).all(table, table) as ReferringKey[];
  const referring = keys.filter((k) => db.prepare(`SELECT 1 FROM main.${quoteIdentifier(k.referrer)} WHERE ${refers(k)} LIMIT 1`).get() !== undefined);
  if (referring.length === 0) return;
  const names = (ks: ReferringKey[]) => [...new Set(ks.map((k) => k.referrer))];
  const acting = referring.filter((k) => ACTIONS.has(k.onDelete));
  const rows = referringRows(db, referring);
  throw acting.length > 0 ? referenced(table, names(acting), 'change', rows) : referenced(table, names(referring), 'break', rows);
}

/** The rows of a key's table that refer through it: every column of the key set. */
function refers(k: ReferringKey): string {
  return k.columns
    .split('\0')
    .map((c) => `${quoteIdentifier(c)} IS NOT NULL`)
    .join(' AND ');
}

/** Referring rows counted up to this, and rowids listed up to {@link SHOWN_ROWIDS}: the refusal shows how many are in the way. */
const COUNTED = 1000;
const SHOWN_ROWIDS = 5;

/**
 * Which rows are in the way, per referring table: how many (up to {@link COUNTED}), and the first
 * rowids. Only integers are shown (a WITHOUT ROWID table, or a column named like the rowid,
 * gives none), so the refusal carries no stored text. Read only once the drop is refused.
 */
function referringRows(db: Database, keys: ReferringKey[]): string {
  const tables = [...new Set(keys.map((k) => k.referrer))];
  return tables
    .map((t) => {
      const where = keys
        .filter((k) => k.referrer === t)
        .map((k) => `(${refers(k)})`)
        .join(' OR ');
      const from = `FROM main.${quoteIdentifier(t)} WHERE ${where}`;
      const count = db.prepare(`SELECT count(*) FROM (SELECT 1 ${from} LIMIT ${COUNTED})`).pluck().get() as number;
      let ids: unknown[] = [];
      try {
        ids = db
          .prepare(`SELECT _rowid_ ${from} ORDER BY 1 LIMIT ${SHOWN_ROWIDS + 1}`)
          .pluck()
          .all();
      } catch {
        // WITHOUT ROWID: the count alone.
      }
      const listed = ids.every((id) => Number.isSafeInteger(id)) ? ids.slice(0, SHOWN_ROWIDS).join(', ') + (ids.length > SHOWN_ROWIDS ? ', …' : '') : '';
      const many = count >= COUNTED ? `${COUNTED} or more rows` : `${count} ${count === 1 ? 'row' : 'rows'}`;
      return `${JSON.stringify(t)}: ${many}${listed ? ` (rowid ${listed})` : ''}`;
    })
    .join('; ');
}

/**
 * Runs `dropIt` (the DROP TABLE of `table`, in the caller's transaction, which `inTransaction`
 * opens) with foreign keys off, after {@link refuseReferencedDrop}: the DROP then removes the
 * table alone, without first deleting its rows one by one. `PRAGMA foreign_keys` is a no-op
 * inside a transaction, so it is set around it; were it still on, the DROP would only be slower,
 * as no row of another table refers to `table` by then.
 */
export function withoutForeignKeys<T>(db: Database, run: () => T): T {
  const was = db.pragma('foreign_keys', { simple: true }) === 1;
  if (was && !db.inTransaction) db.pragma('foreign_keys = OFF');
  try {
    return run();
  } finally {
    if (was) db.pragma('foreign_keys = ON');
  }
}

/**
 * The refusal, naming the referring tables. Its own code, not SQL_REFUSED (whose hint says
 * "drops use DATA_DROP_TABLE", the tool the agent used): the statement is allowed, the rows
 * referring to the table are in the way.
 */
function referenced(table: string, referrers: string[], how: 'change' | 'break', rows: string): AgentDbError {
  const names = referrers.map((n) => JSON.stringify(n)).join(', ');
  const would =
    how === 'change'
      ? 'also delete or change those rows (ON DELETE CASCADE, SET NULL or SET DEFAULT), which a drop neither shows nor asks about'
      : 'break them (ON DELETE NO ACTION or RESTRICT), which SQLite refuses';
  return new AgentDbError(
    'DROP_REFERENCED',
    `rows of ${names} refer to ${JSON.stringify(table)} through their foreign keys: dropping it would ${would}. Delete those rows, or set their reference to NULL, with DATA_WRITE_SQL (or drop ${names}) first, then drop ${JSON.stringify(table)} again. Nothing was dropped. Rows in the way now: ${rows}.`,
  );
}

/**
 * For the check a drop takes before it is parked for a person: a drop that rows of other tables
 * refer to is refused before anyone is asked about it (and again when it runs, since rows may
 * refer to it by then). A read: nothing is tried.
 */
export function tryDropAlone(db: Database, found: { type: 'table' | 'view'; name: string }): void {
  if (found.type === 'table') refuseReferencedDrop(db, found.name);
}
