import type { Database } from 'better-sqlite3';
import { schemaFingerprint } from '../guard/engine-check.ts';
import { MAX_NAME_BYTES } from '../guard/guard.ts';
import type { PlanLimits } from '../policy/plan-limits.ts';
import { trusted } from './sqlite-trusted.ts';

/** Prefix of agentdb's own tables; agents never see or touch them. */
export const INTERNAL_PREFIX = '_agentdb_';

/** `sqlite_schema` rows an agent owns: not the engine's, not agentdb's. */
export const AGENT_OBJECTS = `name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_agentdb\\_%' ESCAPE '\\'`;

/** Tables that count against the plan's table limit. */
export function agentTableCount(db: Database): number {
  return trusted(db, `SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table' AND ${AGENT_OBJECTS}`).pluck().get() as number;
}

/**
 * Why a write's DDL is refused for the views or indexes it leaves (`maxViews`, `maxIndexes`), or
 * undefined. Only a change that adds to a count past its bound is refused: a database that holds
 * more than a lowered bound keeps working, and may drop or alter, but grows no more of them.
 */
export function objectCountRefusal(before: SchemaState, after: SchemaState, limits: Pick<PlanLimits, 'maxViews' | 'maxIndexes'>): string | undefined {
  for (const [type, max] of [
    ['view', limits.maxViews],
    ['index', limits.maxIndexes],
  ] as const) {
    const now = countOf(after, type);
    if (now > max && now > countOf(before, type)) {
      return `the database may hold ${max} ${type === 'view' ? 'views' : 'indexes'} and this would make ${now}`;
    }
  }
  return undefined;
}

/** An agent's objects of `type` in `state` (an index SQLite made for a key is named `sqlite_autoindex_…`, not an agent's). */
function countOf(state: SchemaState, type: 'view' | 'index'): number {
  let n = 0;
  for (const key of state.definitions.keys()) if (key.startsWith(`${type} `)) n++;
  return n;
}

/** What a write is compared on, before and after it runs. */
export interface SchemaState {
  /** The guard's sorted `type:name` list (see `schemaFingerprint`). */
  fingerprint: string[];
  /**
   * Objects no agent statement may create: triggers, virtual tables, temporary objects and
   * anything named like agentdb's internal tables. Counted here too, because a virtual table
   * is `type = 'table'` in the fingerprint and looks like any other table.
   */
  forbidden: number;
  /**
   * Each agent table, view and index (`type name`) with its CREATE text, so that a write's new
   * or changed objects can be told from the rest (ALTER TABLE … ADD COLUMN changes the text and
   * not the fingerprint).
   */
  definitions: Map<string, string>;
}

/** The schema as the write check sees it. */
export function schemaState(db: Database): SchemaState {
  const forbidden = trusted(
    db,
    `SELECT (SELECT count(*) FROM sqlite_schema
              WHERE type = 'trigger' OR sql LIKE 'CREATE VIRTUAL TABLE%' OR name LIKE '\\_agentdb\\_%' ESCAPE '\\')
          + (SELECT count(*) FROM sqlite_temp_schema)`,
  )
    .pluck()
    .get() as number;
  const definitions = trusted(db, `SELECT type, name, sql FROM sqlite_schema WHERE type IN ('table', 'view', 'index') AND ${AGENT_OBJECTS}`).all() as {
    type: string;
    name: string;
    sql: string | null;
  }[];
  return { fingerprint: schemaFingerprint(db), forbidden, definitions: new Map(definitions.map((d) => [`${d.type} ${d.name}`, d.sql ?? ''])) };
}

/**
 * The schema cookies of the main and temp schemas. SQLite bumps a cookie on every schema change
 * (CREATE, ALTER, DROP, in temp too), so equal versions mean an unchanged schema: the cheap test
 * that lets a plain INSERT skip the schema comparison.
 */
export function schemaVersion(db: Database): string {
  const main = trusted(db, 'PRAGMA main.schema_version').pluck().get() as number;
  const temp = trusted(db, 'PRAGMA temp.schema_version').pluck().get() as number;
  return `${main}.${temp}`;
}

// The last state computed per handle, with the version it was computed at.
const lastState = new WeakMap<Database, { version: string; state: SchemaState }>();

/** {@link schemaState} at `version`, computed again only when the schema moved since last time. */
export function schemaStateAt(db: Database, version: string): SchemaState {
  const cached = lastState.get(db);
  if (cached?.version === version) return cached.state;
  const state = schemaState(db);
  lastState.set(db, { version, state });
  return state;
}

/**
 * Keeps {@link schemaStateAt}'s last state across a bump of the temp schema's cookie that left the
 * temp schema as it was at `before` (a preview's recorder, made and dropped): this connection's
 * temp schema is its own, so only the main cookie can say another changed the schema. Without
 * it, the write after every preview read the whole schema again (1-6 ms of CPU beside 500 wide
 * tables; session 38, R14).
 */
export function keepSchemaStateAcrossTemp(db: Database, before: string): void {
  const cached = lastState.get(db);
  if (cached?.version !== before) return;
  const now = schemaVersion(db);
  if (now.slice(0, now.indexOf('.')) === before.slice(0, before.indexOf('.'))) lastState.set(db, { version: now, state: cached.state });
}

/**
 * Why a write's schema change is refused, or undefined when it is fine. The guard should have
 * refused such a statement by its tokens already; this is the second line, judged on what the
 * statement actually did.
 *
 * "Nothing vanished" is judged per object type by count, not by name, so that
 * `ALTER TABLE … RENAME TO` (a table and its automatic indexes change names) stays allowed: one
 * statement cannot both drop an object and create another of the same type.
 */
export function schemaChangeRefusal(before: SchemaState, after: SchemaState): string | undefined {
  if (after.forbidden > before.forbidden) {
    return 'the statement created a trigger, a virtual table, a temporary object or an internal table';
  }
  const countBefore = countByType(before.fingerprint);
  const countAfter = countByType(after.fingerprint);
  for (const [type, n] of countBefore) {
    if ((countAfter.get(type) ?? 0) < n) {
      const gone = before.fingerprint.filter((e) => !after.fingerprint.includes(e));
      return `the statement removed ${gone.join(', ') || `a ${type}`}; use DATA_DROP_TABLE to drop a table or view`;
    }
  }
  for (const entry of after.fingerprint) {
    const type = typeOf(entry);
    if (type === 'trigger' || type.startsWith('temp') || type.startsWith('virtual')) {
      if (!before.fingerprint.includes(entry)) return `the statement created ${entry}`;
    }
  }
  return undefined;
}

// Judged in SQL, so that only long names come back, and only their start.
const LONG_COLUMNS = `SELECT substr(name, 1, 60) AS start, length(CAST(name AS BLOB)) AS bytes FROM pragma_table_xinfo(?, 'main')
  WHERE length(CAST(name AS BLOB)) > ${MAX_NAME_BYTES}`;

/**
 * Why a write leaves a name past `MAX_NAME_BYTES` in the objects it created or changed, or
 * undefined. The guard refuses long identifiers by their tokens, but a string can name a column
 * (`CREATE TABLE t('…' INT)`) and a view's column is named by its expression's text (`CREATE
 * VIEW v AS SELECT '<90 KB>'`). Objects the write left as they were are not judged: a database
 * made before names were limited stays writable.
 */
export function longNameRefusal(db: Database, before: SchemaState, after: SchemaState): string | undefined {
  const refusal = (where: string, bytes: number) =>
    `the statement made a name of ${bytes} bytes (${[...where].slice(0, 60).join('')}…); names of tables, views, columns and indexes may be at most ${MAX_NAME_BYTES} bytes (UTF-8): name a long expression with AS`;
  for (const [key, sql] of after.definitions) {
    if (before.definitions.get(key) === sql) continue;
    const space = key.indexOf(' ');
    const type = key.slice(0, space);
    const name = key.slice(space + 1);
    const bytes = Buffer.byteLength(name);
    if (bytes > MAX_NAME_BYTES) return refusal(key, bytes);
    if (type === 'index') continue;
    let long: { start: string; bytes: number } | undefined;
    try {
      long = trusted(db, LONG_COLUMNS).get(name) as { start: string; bytes: number } | undefined;
    } catch {
      continue; // a view over something that does not exist yet has no columns to judge
    }
    if (long) return refusal(`${key}, column ${long.start}`, long.bytes);
  }
  return undefined;
}

function typeOf(entry: string): string {
  const colon = entry.indexOf(':');
  return colon < 0 ? entry : entry.slice(0, colon);
}

function countByType(fingerprint: string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const entry of fingerprint) counts.set(typeOf(entry), (counts.get(typeOf(entry)) ?? 0) + 1);
  return counts;
}
