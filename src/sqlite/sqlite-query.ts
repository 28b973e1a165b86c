import type { Database, Statement } from 'better-sqlite3';
import { AgentDbError } from '../errors.ts';
import { cachedStatement, checkedStatement, statementKey } from './statement-cache.ts';
import { agentBindings, readRows, type Param, type ReadRows, type SpillOpener } from './sqlite-values.ts';
import { inRolledBackRead } from './sqlite-trusted.ts';
import { agentTableList } from './agent-table-list.ts';

/** What DATA_QUERY_SQL answers: rows cut at `maxRows` and at the result size. */
export type QueryResult = ReadRows;

/**
 * Runs one agent query. Both guard layers judge it as a read; it runs inside a transaction that
 * is always rolled back (but for a read judged before: see below), and rows are read one by one
 * up to `maxRows` (+1 to learn whether more existed) and `maxResultBytes` of JSON for the column
 * names and rows together (see `readRows`). With `spill`, a result past the size is written
 * whole (up to `maxRows`) to a file as well.
 * @throws AgentDbError for a refusal; SQLite's own errors propagate for `toOpError`.
 */
export function query(
  db: Database,
  sql: string,
  params: readonly Param[],
  maxRows: number,
  maxResultBytes: number,
  mode: 'read' | 'introspect' = 'read',
  spill?: SpillOpener,
): QueryResult {
  const bindings = agentBindings(sql, params);
  // A statement judged before that SQLite says writes nothing is one statement, which sees one
  // snapshot and leaves nothing behind on its own: it runs without the transaction around it,
  // whose BEGIN and ROLLBACK cost a PK read about as much as the read did (issue 31). A miss is
  // judged and run in the transaction, so the verdict's EXPLAIN and the read see one snapshot.
  const key = statementKey(db, sql, mode);
  const cached = cachedStatement(db, sql, mode, key);
  // What runs once the guard has judged `sql`: itself, but for a bare `PRAGMA table_list`,
  // which would list agentdb's and the engine's tables (see agent-table-list.ts).
  const run = (stmt: Statement) => (mode === 'introspect' && /table_list/i.test(sql) ? (agentTableList(db, sql) ?? stmt) : stmt);
  if (cached?.reader && cached.readonly) return readRows(run(cached), bindings, maxRows, maxResultBytes, spill);
  return inRolledBackRead(db, () => {
    const stmt = cached ?? checkedStatement(db, sql, mode, key);
    // The guard admits only statements that return rows for a read; this keeps `readRows`
    // from ever meeting one that does not.
    if (!stmt.reader) throw new AgentDbError('SQL_REFUSED', 'a query must return rows');
    return readRows(run(stmt), bindings, maxRows, maxResultBytes, spill);
  });
}
