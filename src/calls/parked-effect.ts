import type { Approval } from '../approvals/approval.ts';
import type { Config } from '../config.ts';
import type { Effect, EffectLimits } from '../contracts/effect.ts';
import { AgentDbError } from '../errors.ts';
import type { ExecOutcome, ExecRequest } from '../executor/executor-protocol.ts';
import { jsonBytes } from './redis-bytes.ts';

/**
 * What a parked write would change now, computed on the database's own process in a transaction
 * that is always rolled back; null with a note when it cannot be: too slow for the statement
 * time limit, a statement that fails on today's data, a database not made yet.
 * @throws AgentDbError when no database process could answer (the job runs again).
 */
export async function previewParked(
  executor: { run(req: ExecRequest): Promise<ExecOutcome> },
  config: Config,
  request: Extract<ExecRequest, { op: 'write' }>,
  args: Record<string, unknown>,
): Promise<{ effect: Effect | null; effectNote?: string }> {
  const outcome = await executor.run({ op: 'effect', db: request.db, sql: request.sql, params: request.params, limits: effectLimits(config, args) });
  if (!outcome.ok && outcome.unsettled) throw new AgentDbError(outcome.error.code, outcome.error.detail);
  if (outcome.ok && outcome.result) return { effect: outcome.result as Effect };
  if (outcome.ok) return { effect: null, effectNote: 'The database does not exist yet: this write would be its first, and it changes no existing rows.' };
  if (outcome.error.code === 'STATEMENT_TIMEOUT') {
    return {
      effect: null,
      effectNote: `Its effect could not be computed within the statement time limit (${config.statementTimeoutMs} ms, STATEMENT_TIMEOUT_MS): it changes many rows or runs long. Approved, it runs recording its effect and commits only if it changes no rows: if it changes any, it is asked about again with that effect, so a write this large may never commit under approval (split it into smaller writes).`,
    };
  }
  return {
    effect: null,
    effectNote: `Its effect could not be computed on the data as it is now (${outcome.error.code}: ${outcome.error.detail.slice(0, 500)}); if an earlier parked call makes what it needs, approving runs it without committing and asks again with the effect it has then.`,
  };
}

/**
 * How much of an effect a call's approval may keep: APPROVAL_EFFECT_ROWS rows, in what
 * MAX_PARKED_CALL_BYTES leaves beside the call's arguments (both stay in Redis while it waits).
 */
export function effectLimits(config: Config, args: Record<string, unknown>): EffectLimits {
  return { maxRows: config.approvalEffectRows, maxBytes: Math.max(0, config.maxParkedCallBytes - jsonBytes(args)) };
}

/** The arguments of a parked call as its approval keeps them, for what they weigh. */
export function approvedArgs(a: Approval): Record<string, unknown> {
  return { sql: a.sql, ...(a.params ? { params: a.params } : {}), ...(a.rationale ? { rationale: a.rationale } : {}) };
}
