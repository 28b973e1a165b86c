import { createHash } from 'node:crypto';
import type { Database, Statement } from 'better-sqlite3';
import { prepareChecked, type CheckedStatement, type CheckMode } from '../guard/engine-check.ts';
import { schemaVersion } from './sqlite-schema.ts';
import { trusted } from './sqlite-trusted.ts';

/** What a handle's schema is, at one schema version: its text's bytes and, when small enough to hash, a digest of all of it. */
export interface SchemaIdentity {
  version: string;
  /** UTF-8 bytes of the schema's SQL text (what a cached statement costs at least). */
  bytes: number;
  /**
   * SHA-256 of every object of the main and temp schemas: type, names, root page and SQL.
   * Undefined past {@link MAX_SHARED_SCHEMA_BYTES}: such a schema's reads are judged in full.
   */
  digest?: string;
}

/**
 * The largest schema (bytes of its SQL text) whose reads share verdicts. Its identity is read
 * into JavaScript and hashed on a handle's first miss and after every schema change, writes
 * included: a tenant's 40 MB of DEFAULTs (ALTER TABLE ADD COLUMN, 1 MB each, 40 times) took
 * 250 ms and 80 MB of a shared child there (review R3). Past this, only the size is read, summed
 * in SQL as before the shared verdicts, and the schema's reads take the full check: an agent's
 * schema is a few kilobytes, and one this large pays its reads' EXPLAIN, not everyone's child.
 */
export const MAX_SHARED_SCHEMA_BYTES = 64 * 1024;

const identities = new WeakMap<Database, SchemaIdentity>();

/**
 * The main schema's objects, each with its SQL's UTF-8 bytes, and the SQL itself only up to
 * {@link MAX_SHARED_SCHEMA_BYTES}: a 40 MB CREATE TABLE is measured in SQL, never read out.
 */
const MAIN_OBJECTS = `SELECT 'main', type, name, tbl_name, rootpage,
  CASE WHEN length(CAST(sql AS BLOB)) <= ${MAX_SHARED_SCHEMA_BYTES} THEN sql END, coalesce(length(CAST(sql AS BLOB)), 0)
  FROM main.sqlite_schema`;

/** The schema of `db` as it is now, read once per handle and schema version. */
export function schemaIdentity(db: Database): SchemaIdentity {
  const version = schemaVersion(db);
  const known = identities.get(db);
  if (known?.version === version) return known;
  const temp = version.slice(version.indexOf('.') + 1);
  const identity = (temp === '0' && mainIdentity(db, version)) || fullIdentity(db, version);
  identities.set(db, identity);
  return identity;
}

/**
 * The identity of a schema whose temp part has never changed (its cookie 0: a handle's temp
 * schema is empty until something is created in it, and the guard lets no agent create a temp
 * object nor set a cookie), read in one statement of the main schema alone: on a handle cache
 * miss, {@link fullIdentity}'s two statements over both schemas and a hash per row took a median
 * of 0.124-0.159 ms, this 0.099-0.128 (a fresh hardened handle, a three-object schema; issue 31).
 * The digest is the one {@link fullIdentity} gives the same schema: one JSON array of ['main',
 * type, name, tbl_name, rootpage, sql] rows, hashed once. Undefined past {@link MAX_SHARED_SCHEMA_BYTES}.
 */
function mainIdentity(db: Database, version: string): SchemaIdentity | undefined {
  const rows: unknown[][] = [];
  let bytes = 0;
  for (const row of trusted(db, MAIN_OBJECTS).raw().iterate() as IterableIterator<unknown[]>) {
    bytes += row.pop() as number;
    // Past the cap: stop reading SQL out (leaving the loop resets the statement); the caller sums it in SQL.
    if (bytes > MAX_SHARED_SCHEMA_BYTES) return undefined;
    rows.push(row);
  }
  return { version, bytes, digest: createHash('sha256').update(JSON.stringify(rows)).digest('hex') };
}

/** The identity read from both schemas: the size summed in SQL, the objects read out only when small enough. */
function fullIdentity(db: Database, version: string): SchemaIdentity {
  const bytes = trusted(
    db,
    `SELECT coalesce(sum(length(CAST(sql AS BLOB))), 0)
     FROM (SELECT sql FROM main.sqlite_schema UNION ALL SELECT sql FROM temp.sqlite_schema)`,
  )
    .pluck()
    .get() as number;
  const identity: SchemaIdentity = { version, bytes };
  if (bytes <= MAX_SHARED_SCHEMA_BYTES) {
    const rows = trusted(
      db,
      `SELECT 'main', type, name, tbl_name, rootpage, sql FROM main.sqlite_schema
       UNION ALL SELECT 'temp', type, name, tbl_name, rootpage, sql FROM temp.sqlite_schema`,
    )
      .raw()
      .all() as unknown[][];
    identity.digest = createHash('sha256').update(JSON.stringify(rows)).digest('hex');
  }
  return identity;
}

/** Reads admitted at most, remembered: a key, two numbers and a flag each, well under a megabyte. */
const MAX_ADMITTED = 4096;

/** What preparing an admitted read again on another handle needs. */
interface Admitted {
  start: number;
  programLength: number;
  singleRow: boolean;
}

/**
 * Both guard layers' verdicts on reads they admitted, shared by every handle of one executor
 * child (issue 31). A verdict is a property of the SQL and of the schema it compiles against,
 * not of the connection: every handle is hardened alike (`hardenConnection`), and what the
 * engine check judges — the b-trees the program opens, named through the schema's root pages,
 * the functions and virtual tables it calls — follows from the two. So a read admitted on one
 * database is admitted on another whose schema is the same to the byte (same objects, same root
 * pages, same SQL), and its new handle need not compile it under EXPLAIN again: with many more
 * databases than handles, nearly every read was new to its handle, and the PK read on a new
 * handle took 0.17 ms of a 0.81 ms miss in a child with the check, 0.12 ms without.
 *
 * Only reads, only admissions, only schemas up to {@link MAX_SHARED_SCHEMA_BYTES}: a refusal or
 * an error is judged afresh each time. The statement itself is still prepared on its own handle,
 * and must still be read-only and return rows, as SQLite says; anything else goes through both
 * layers in full.
 */
export class SharedVerdicts {
  private readonly admitted = new Map<string, Admitted>();

  /** {@link prepareChecked}, taking a read's admission from another handle of the same schema. */
  check(db: Database, sql: string, mode: CheckMode): CheckedStatement {
    if (mode !== 'read') return prepareChecked(db, sql, mode);
    const { digest } = schemaIdentity(db);
    if (digest === undefined) return prepareChecked(db, sql, mode);
    const key = createHash('sha256').update(digest).update('\u0000').update(sql).digest('hex');
    const known = this.admitted.get(key);
    if (known) {
      const stmt = preparedRead(db, sql.slice(known.start));
      if (stmt) {
        // Re-insert so the Map's order stays least-recently-used first.
        this.admitted.delete(key);
        this.admitted.set(key, known);
        return { ok: true, stmt, programLength: known.programLength, start: known.start, singleRow: known.singleRow };
      }
    }
    const verdict = prepareChecked(db, sql, mode);
    if (verdict.ok) {
      this.admitted.set(key, { start: verdict.start, programLength: verdict.programLength, singleRow: verdict.singleRow });
      if (this.admitted.size > MAX_ADMITTED) this.admitted.delete(this.admitted.keys().next().value!);
    }
    return verdict;
  }

  /** Reads remembered now (for tests). */
  get size(): number {
    return this.admitted.size;
  }
}

/** The statement, when it compiles here to a read-only one that returns rows; else undefined (judged in full). */
function preparedRead(db: Database, text: string): Statement | undefined {
  let stmt: Statement;
  try {
    stmt = db.prepare(text);
  } catch {
    return undefined;
  }
  return stmt.readonly && stmt.reader ? stmt : undefined;
}
