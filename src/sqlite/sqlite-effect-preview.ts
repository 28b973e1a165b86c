import type { Database } from 'better-sqlite3';
import type { Effect, EffectLimits } from '../contracts/effect.ts';
import { guardWrite } from '../guard/guard.ts';
import type { PlanLimits } from '../policy/plan-limits.ts';
import { EffectRecorder, NO_ROWS_EFFECT } from './sqlite-effect.ts';
import { CreatedRows } from './created-rows.ts';
import { trusted } from './sqlite-trusted.ts';
import { agentBindings, type Param } from './sqlite-values.ts';
import { applySizeLimit, runWrite } from './sqlite-write.ts';
import { checkedStatement } from './statement-cache.ts';

/**
 * What an agent write would change now, computed by running it in a transaction that is always
 * rolled back: the statement passes the same guard and size limit as its real run, and the
 * effect is recorded the way the real run records it (so equal data gives an equal digest).
 * DDL changes no rows: its effect is empty, but for the rows a CREATE TABLE … AS SELECT makes. Bounded by the executor's statement timeout like any
 * statement (a child killed mid-way commits nothing either).
 * @throws AgentDbError for refusals; SQLite's errors (a constraint, a missing table) propagate.
 */
export function previewEffect(db: Database, sql: string, params: readonly Param[], plan: PlanLimits, limits: EffectLimits): Effect {
  const bindings = agentBindings(sql, params);
  const verdict = guardWrite(sql);
  if (verdict.ok && verdict.ddl && verdict.kind !== 'create_table') {
    checkedStatement(db, sql, 'write');
    return NO_ROWS_EFFECT;
  }
  applySizeLimit(db, plan.maxBytes);
  const stmt = checkedStatement(db, sql, 'write');
  trusted(db, 'BEGIN IMMEDIATE').run();
  let recorder: EffectRecorder | undefined;
  try {
    // A CREATE TABLE changes no row but makes its own (… AS SELECT): those are its effect.
    if (verdict.ok && verdict.ddl) {
      const created = new CreatedRows(db, sql);
      runWrite(db, stmt, bindings, 1024, true, verdict.kind, sql);
      return created.read(limits);
    }
    recorder = new EffectRecorder(db, sql);
    runWrite(db, stmt, bindings, 1024, false, verdict.ok ? verdict.kind : undefined, sql);
    return recorder.read(limits);
  } finally {
    // Always: nothing of a preview may commit (its temporary triggers go with it).
    if (db.inTransaction) trusted(db, 'ROLLBACK').run();
    recorder?.restorePragma();
  }
}
