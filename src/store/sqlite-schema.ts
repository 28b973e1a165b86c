import type { Database } from 'better-sqlite3';
import { schemaFingerprint } from '../guard/engine-check.ts';
import { MAX_NAME_BYTES } from '../guard/guard.ts';
import { trusted } from './sqlite-trusted.ts';

/** Prefix of agentdb's own tables; agents never see or touch them. */
export const INTERNAL_PREFIX = '_agentdb_';

/** `sqlite_schema` rows an agent owns: not the engine's, not agentdb's. */
export const AGENT_OBJECTS = `name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_agentdb\\_%' ESCAPE '\\'`;

/** Tables that count against the plan's table limit. */
export function agentTableCount(db: Database): number {
  return trusted(db, `SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table' AND ${AGENT_OBJECTS}`).pluck().get() as number;
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
   * Names past `MAX_NAME_BYTES` in the agent's schema, of objects and of their columns: the
   * guard refuses long identifiers by their tokens, but a string can name a column
   * (`CREATE TABLE t('…' INT)`) and a view's column is named by its expression's text.
   */
  longNames: LongName[];
}

/** One name past `MAX_NAME_BYTES`: where it is (`view v`, `table t, column c`) and its length. */
export interface LongName {
  where: string;
  bytes: number;
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
  return { fingerprint: schemaFingerprint(db), forbidden, longNames: longNames(db) };
}

function longNames(db: Database): LongName[] {
  const found: LongName[] = [];
  const check = (where: string, name: string) => {
    if (name.length * 3 <= MAX_NAME_BYTES) return;
    const bytes = Buffer.byteLength(name);
    if (bytes > MAX_NAME_BYTES) found.push({ where, bytes });
  };
  const objects = trusted(db, `SELECT name, type FROM sqlite_schema WHERE type IN ('table', 'view', 'index') AND ${AGENT_OBJECTS}`).all() as {
    name: string;
    type: string;
  }[];
  for (const o of objects) {
    check(`${o.type} ${o.name}`, o.name);
    if (o.type === 'index') continue;
    let columns: string[];
    try {
      columns = trusted(db, `SELECT name FROM pragma_table_xinfo(?, 'main')`).pluck().all(o.name) as string[];
    } catch {
      continue; // a view over something that no longer exists has no columns to judge
    }
    for (const c of columns) check(`${o.type} ${o.name}, column ${c}`, c);
  }
  return found;
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
  const long = after.longNames.find((n) => !before.longNames.some((b) => b.where === n.where));
  if (long) {
    const where = [...long.where].slice(0, 60).join('');
    return `the statement made a name of ${long.bytes} bytes (${where}…); names of tables, views, columns and indexes may be at most ${MAX_NAME_BYTES} bytes (UTF-8): name a long expression with AS`;
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

function typeOf(entry: string): string {
  const colon = entry.indexOf(':');
  return colon < 0 ? entry : entry.slice(0, colon);
}

function countByType(fingerprint: string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const entry of fingerprint) counts.set(typeOf(entry), (counts.get(typeOf(entry)) ?? 0) + 1);
  return counts;
}
