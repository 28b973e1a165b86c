import type { Database, Statement } from 'better-sqlite3';
import { prepareChecked, type CheckMode } from '../guard/engine-check.ts';
import { AgentDbError } from '../errors.ts';

/** Statements kept per open database; agents repeat the same few statements. */
const PER_HANDLE = 64;

// Keyed by the Database object, so a closed and forgotten handle takes its statements with it.
const caches = new WeakMap<Database, Map<string, Statement>>();

/**
 * Agent SQL prepared through both guard layers, as a statement ready to run.
 *
 * A statement is cached only together with the verdict that let it through, under a key that
 * holds the mode: a statement admitted for 'write' is never handed out for 'read'. Refusals and
 * errors are not cached, since an error such as `no such table` changes with the schema.
 * @throws AgentDbError with the guard's code and reason when the statement is refused.
 */
export function checkedStatement(db: Database, sql: string, mode: CheckMode): Statement {
  let cache = caches.get(db);
  const key = `${mode}\u0000${sql}`;
  const hit = cache?.get(key);
  if (hit) {
    // Re-insert so the Map's order is least-recently-used first.
    cache!.delete(key);
    cache!.set(key, hit);
    return hit;
  }
  const verdict = prepareChecked(db, sql, mode);
  if (!verdict.ok) throw new AgentDbError(verdict.code, verdict.reason);
  if (!cache) caches.set(db, (cache = new Map()));
  if (cache.size >= PER_HANDLE) cache.delete(cache.keys().next().value!);
  cache.set(key, verdict.stmt);
  return verdict.stmt;
}

/**
 * Drops every cached statement of `db`. Called after the schema changed, so each verdict is
 * taken again against the schema the statement will now run on.
 */
export function forgetStatements(db: Database): void {
  caches.delete(db);
}
