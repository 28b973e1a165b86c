import type { Database, Statement } from 'better-sqlite3';
import { isOp } from '../guard/classifier.ts';
import { parseStatement } from '../guard/guard.ts';
import { asciiLower } from '../guard/tokenizer.ts';
import { AGENT_OBJECTS } from './sqlite-schema.ts';
import { trusted } from './sqlite-trusted.ts';

/**
 * db_query's `PRAGMA [main.]table_list` with no argument, as an agent may see it. SQLite's own
 * lists every table of every schema: agentdb's `_agentdb_*` tables and the engine's `sqlite_*`
 * and `temp` ones too, names the guard refuses everywhere else and DATA_DESCRIBE_SCHEMA hides
 * (session 32, R5). This reads the same table-valued function, with the same columns in the
 * same order, keeping the main schema's agent tables only. With an argument the PRAGMA names
 * one table, which the guard has judged already.
 */
const AGENT_TABLE_LIST = `SELECT schema, name, type, ncol, wr, strict FROM pragma_table_list
  WHERE schema = 'main' AND ${AGENT_OBJECTS}`;

/** The statement to run for `sql` in place of SQLite's PRAGMA, when `sql` is a bare table_list. */
export function agentTableList(db: Database, sql: string): Statement | undefined {
  const parsed = parseStatement(sql);
  if ('ok' in parsed) return undefined;
  const t = parsed.tokens;
  if (t[0]?.kind !== 'word' || t[0].value !== 'pragma') return undefined;
  const at = isOp(t[2], '.') ? 3 : 1;
  const name = t[at];
  if (name === undefined || at + 1 !== t.length || asciiLower(name.value) !== 'table_list') return undefined;
  return trusted(db, AGENT_TABLE_LIST);
}
