import type { Database } from 'better-sqlite3';
import { schemaFingerprint } from '../guard/engine-check.ts';
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
  return { fingerprint: schemaFingerprint(db), forbidden };
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
