import type { Database } from 'better-sqlite3';
import type { CsvArgs, CsvChunk, PageCursor } from '../contracts/browse.ts';
import { AgentDbError } from '../errors.ts';
import { csvHeader, csvRecord } from './csv-format.ts';
import { fromCursorValue, keysetWhere, orderBy, selectList, shapeOf, toCursorValue } from './sqlite-browse.ts';
import { inRolledBackRead, quoteIdentifier, trusted } from './sqlite-trusted.ts';

/**
 * Up to `count` keys past `from`, each about `rows` rows further (a little less, so a range
 * between two bounds fits in a chunk as often as not): walking keys is cheap next to formatting
 * the rows, and it lets the exporter ask for the next chunks before this one arrives, so the
 * owner formats one while the last is still on its way. Within this chunk's snapshot; a range
 * written to since is still read whole, as it stands then.
 */
function boundsPast(db: Database, from: string, key: string, start: unknown, rows: number, count: number): PageCursor[] {
  const stride = Math.max(1, Math.floor(rows * 0.9));
  const step = trusted(db, `SELECT ${key} FROM ${from} WHERE ${key} > ? ORDER BY ${key} LIMIT 1 OFFSET ?`).pluck().safeIntegers(true);
  const bounds: PageCursor[] = [];
  let at = start;
  for (let i = 0; i < count; i++) {
    const next = step.get(at, stride - 1);
    if (next === undefined) break;
    bounds.push({ k: toCursorValue(next) });
    at = next;
  }
  return bounds;
}

/**
 * One chunk of a table as CSV text (csv-format.ts), in key order, from `after`: the first chunk
 * holds the header row and the row count. Each chunk is its own snapshot; a table written to
 * during an export is read as it stands at each chunk, rows never twice (keyset).
 */
export function csvChunk(db: Database, args: Required<Pick<CsvArgs, 'maxChars'>> & CsvArgs): CsvChunk {
  return inRolledBackRead(db, () => {
    const shape = shapeOf(db, args.table);
    // A chunk asked for by key of a table that has none now (columns named rowid, _rowid_ and
    // oid added since), or by offset of one that has one now: read from the start, each range
    // asked for at once would repeat the table. The export stops instead (its download aborts).
    if (shape.key ? (args.offset ?? 0) > 0 : args.after !== undefined || args.until !== undefined) {
      throw new AgentDbError(
        'NOT_FOUND',
        `${JSON.stringify(shape.name)} changed during the export (its rowid became reachable or unreachable by name); export it again`,
      );
    }
    const first = args.after === undefined && (args.offset ?? 0) === 0;
    const from = `main.${quoteIdentifier(shape.name)}`;
    const after = args.after && shape.key ? keysetWhere(undefined, shape.key, 'asc', args.after) : undefined;
    const until = args.until && shape.key ? { sql: `${shape.key} <= ?`, binds: [fromCursorValue(args.until.k)] } : undefined;
    const where =
      after || until ? { sql: [after?.sql, until?.sql].filter(Boolean).join(' AND '), binds: [...(after?.binds ?? []), ...(until?.binds ?? [])] } : undefined;
    const offset = shape.key ? undefined : (args.offset ?? 0);
    const sql =
      `SELECT ${selectList(shape, undefined)} FROM ${from}` +
      (where ? ` WHERE ${where.sql}` : '') +
      orderBy(undefined, shape.key, 'asc') +
      (offset !== undefined ? ' LIMIT -1 OFFSET ?' : '');
    const binds = [...(where?.binds ?? []), ...(offset !== undefined ? [offset] : [])];
    const n = shape.columns.length;
    let csv = first ? csvHeader(shape.columns.map((c) => c.name)) : '';
    let rows = 0;
    let lastKey: unknown;
    let done = true;
    for (const r of db
      .prepare(sql)
      .raw(true)
      .safeIntegers(true)
      .iterate(...binds) as Iterable<unknown[]>) {
      // At least one row a chunk: its key is where the next starts (a header past maxChars, with no
      // row, left no key and the export went on from "past NULL", which is nothing).
      if (rows > 0 && csv.length >= args.maxChars) {
        // One row read past the chunk: it says more exist; leaving the loop resets the statement.
        done = false;
        break;
      }
      csv += csvRecord(n === r.length ? r : r.slice(0, n));
      lastKey = r[n];
      rows++;
    }
    const chunk: CsvChunk = { csv, rows };
    if (first && shape.type === 'table') chunk.total = Number(trusted(db, `SELECT count(*) FROM ${from}`).pluck().get());
    if (!done) chunk.next = shape.key ? { after: { k: toCursorValue(lastKey) } } : { offset: (args.offset ?? 0) + rows };
    if (!done && shape.key && args.bounds && !args.until) chunk.bounds = boundsPast(db, from, shape.key, lastKey, rows, args.bounds);
    return chunk;
  });
}
