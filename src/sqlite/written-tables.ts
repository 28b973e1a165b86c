import type { Database } from 'better-sqlite3';
import { nullBindings } from '../guard/engine-check.ts';
import { parseStatement } from '../guard/guard.ts';
import { AGENT_OBJECTS } from './sqlite-schema.ts';
import { trusted } from './sqlite-trusted.ts';

/**
 * The tables of the main database a write statement can change, by name as the schema spells
 * them: every b-tree its compiled program opens for writing (`OpenWrite`) or empties (`Clear`, a
 * `DELETE` without `WHERE`), its foreign-key actions' subprograms included (EXPLAIN lists them,
 * and the actions of the tables they write in turn), each index's by its table. The guard refuses
 * a write whose program opens a b-tree chosen at run time, so no other table can change.
 * Undefined when the program cannot be read: then every table may.
 *
 * Why: the effect recorder installed a log and three triggers on every table of the database,
 * whatever the write touched, ~0.5 ms a table; on 50 tables of 1,999 columns (a pro plan's
 * limit), ~1 s of CPU for each preview and again for each approved run of a one-row insert, so
 * one agent's wide tables could push every approved write of a shared database past its time
 * limit (session 34, R8's leftover; session 36, R10).
 */
export function writtenTables(db: Database, sql: string): Set<string> | undefined {
  const parsed = parseStatement(sql);
  if ('ok' in parsed) return undefined;
  try {
    const ops = db.prepare(`EXPLAIN ${sql.slice(parsed.tokens[0]!.offset)}`).all(...nullBindings(parsed.tokens)) as {
      opcode: string;
      p1: number;
      p2: number;
      p3: number;
    }[];
    const roots = new Set<number>();
    for (const op of ops) {
      if (op.opcode === 'OpenWrite' && op.p3 === 0) roots.add(op.p2);
      else if (op.opcode === 'Clear' && op.p2 === 0) roots.add(op.p1);
    }
    if (roots.size === 0) return new Set();
    const owners = trusted(db, `SELECT rootpage, tbl_name FROM main.sqlite_schema WHERE rootpage > 0`).raw(true).all() as [number, string][];
    return new Set(owners.filter(([root]) => roots.has(root)).map(([, table]) => table));
  } catch {
    return undefined;
  }
}

/**
 * The agent tables (no virtual ones) an effect recorder watches for `sql`: those it can write, by
 * name, each with whether it is WITHOUT ROWID (`wr`) and whether its PRIMARY KEY has an index of
 * its own (`pkIndex`: no rowid alias). pragma_table_list is read once: asked per table, it listed
 * every table for each, and a preview beside 500 tables took 60-90 ms CPU for a one-row insert
 * (session 37, R12).
 */
export function watchedTables(db: Database, sql: string): { name: string; wr: number; pkIndex: number }[] {
  const written = writtenTables(db, sql);
  const rows = trusted(db, "SELECT name, wr FROM pragma_table_list WHERE schema = 'main' AND type = 'table'").all() as { name: string; wr: number }[];
  const withoutRowid = new Map(rows.map((t) => [t.name, t.wr]));
  const pkIndexes = trusted(db, "SELECT count(*) FROM pragma_index_list(?, 'main') AS x WHERE x.origin = 'pk'").pluck();
  const names = trusted(
    db,
    `SELECT name FROM main.sqlite_schema WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' AND ${AGENT_OBJECTS} ORDER BY name`,
  )
    .pluck()
    .all() as string[];
  return names
    .filter((name) => written === undefined || written.has(name))
    .map((name) => ({ name, wr: withoutRowid.get(name) ?? 0, pkIndex: pkIndexes.get(name) as number }));
}
