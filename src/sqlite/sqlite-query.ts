import type { Database } from 'better-sqlite3';
import { AgentDbError } from '../errors.ts';
import { checkedStatement } from './statement-cache.ts';
import { agentBindings, readRows, type Param, type ReadRows, type SpillOpener } from './sqlite-values.ts';
import { inRolledBackRead } from './sqlite-trusted.ts';

/** What DATA_QUERY_SQL answers: rows cut at `maxRows` and at the result size. */
export type QueryResult = ReadRows;

/**
 * Runs one agent query. Both guard layers judge it as a read; it runs inside a transaction that
 * is always rolled back, and rows are read one by one up to `maxRows` (+1 to learn whether more
 * existed) and `maxResultBytes` of JSON for the column names and rows together (see `readRows`).
 * With `spill`, a result past the size is written whole (up to `maxRows`) to a file as well.
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
  return inRolledBackRead(db, () => {
    const stmt = checkedStatement(db, sql, mode);
    // The guard admits only statements that return rows for a read; this keeps `readRows`
    // from ever meeting one that does not.
    if (!stmt.reader) throw new AgentDbError('SQL_REFUSED', 'a query must return rows');
    return readRows(stmt, bindings, maxRows, maxResultBytes, spill);
  });
}
