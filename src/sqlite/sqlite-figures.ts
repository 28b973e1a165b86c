import { statSync } from 'node:fs';
import type { Database } from 'better-sqlite3';
import { AGENT_OBJECTS } from './sqlite-schema.ts';
import { inRolledBackRead, quoteIdentifier, trusted } from './sqlite-trusted.ts';

/** Rows one table is counted up to: a big table costs no more than this many steps. */
export const ROW_COUNT_CAP = 100_000;
/** Rows counted across a whole database: tables past it are counted up to what is left. */
export const ROW_COUNT_BUDGET = 1_000_000;

/** A database at a glance, as the Data page lists it. */
export interface DatabaseFigures {
  /** Bytes on disk: the database file and its WAL. */
  bytes: number;
  /** The agents' tables (views and agentdb's own tables are not counted). */
  tables: number;
  /** Rows of those tables, each counted up to {@link ROW_COUNT_CAP} and all up to {@link ROW_COUNT_BUDGET}. */
  rows: number;
  /** True when a table was counted only up to a cap: `rows` is then a lower bound. */
  rowsAtLeast?: true;
  /** When the file or its WAL was last written (ms since the epoch); null when it has no file yet. */
  lastWriteAt: number | null;
}

/**
 * Size, tables, rows and last write of the database `db` opened at `path`, bounded in cost: rows
 * are counted with `LIMIT`, so a table of ten million rows is read to its cap, not to its end.
 * (`count(*)` walks every page of a table, and `sqlite_stat1` holds figures only after an
 * ANALYZE, which nothing runs.) The last write is the file's modification time, or its WAL's
 * (a commit writes the WAL, a checkpoint the file): no table of agentdb's is read for it.
 * `placeholder`: the database has no file yet (the handle cache's empty stand-in).
 */
export function databaseFigures(db: Database, path: string, placeholder: boolean): DatabaseFigures {
  if (placeholder) return { bytes: 0, tables: 0, rows: 0, lastWriteAt: null };
  let bytes = 0;
  let lastWriteAt: number | null = null;
  for (const file of [path, `${path}-wal`]) {
    const st = statSync(file, { throwIfNoEntry: false });
    if (!st) continue;
    bytes += st.size;
    lastWriteAt = Math.max(lastWriteAt ?? 0, Math.floor(st.mtimeMs));
  }
  return inRolledBackRead(db, () => {
    const names = trusted(db, `SELECT name FROM sqlite_schema WHERE type = 'table' AND ${AGENT_OBJECTS} ORDER BY name`).pluck().all() as string[];
    let rows = 0;
    let atLeast = false;
    for (const name of names) {
      const cap = Math.min(ROW_COUNT_CAP, ROW_COUNT_BUDGET - rows);
      if (cap <= 0) {
        atLeast = true;
        break;
      }
      // One past the cap tells a table at the cap from a bigger one. Prepared anew: a table name is not a statement worth caching.
      const n = db
        .prepare(`SELECT count(*) FROM (SELECT 1 FROM main.${quoteIdentifier(name)} LIMIT ?)`)
        .pluck()
        .get(cap + 1) as number;
      if (n > cap) atLeast = true;
      rows += Math.min(n, cap);
    }
    return { bytes, tables: names.length, rows, ...(atLeast ? { rowsAtLeast: true as const } : {}), lastWriteAt };
  });
}
