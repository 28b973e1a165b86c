import type { ErrorEnvelope } from '../contracts/envelope.ts';
import { errorEnvelope } from '../contracts/envelope.ts';
import type { DbTranslation } from '../policy/db-surface.ts';
import type { AwaitingAnswer, CallAnswer } from './call-answers.ts';

/** db_exec's answer under `policy: "require-approval"`: APPROVAL_REQUIRED and the request made. */
export type ApprovalRequiredAnswer = ErrorEnvelope & {
  /** The approval request made: its id, tier and expiry, with the statement and the model's rationale. */
  approval: AwaitingAnswer['approval'] & { statement: string; rationale: unknown };
};

/** A db_* call the surface let through, as the DATA_* call it runs as. */
export type TranslatedDbCall = Extract<DbTranslation, { ok: true }>;

/**
 * The answer of a db_* call run as `t`, as the db_* tool gives it (db-capability.md), for every
 * way in (a key's calls, `db()`): named after the db_* tool; db_schema's result is
 * `{ database, schema }`; and a call `t.requireApproval` parked answers APPROVAL_REQUIRED at once
 * with the approval request, whose input is the statement and the rationale.
 */
export function dbAnswer(answer: CallAnswer, t: TranslatedDbCall, database: string, statement: unknown): CallAnswer | ApprovalRequiredAnswer {
  if (t.requireApproval && 'status' in answer && answer.status === 'awaiting_approval') {
    const env = errorEnvelope(
      answer.callId,
      t.dbTool,
      'APPROVAL_REQUIRED',
      `db_exec needs a person's approval (approval ${answer.approval.id}); it runs once approved, under call id ${answer.callId}.`,
    );
    return { ...env, approval: { ...answer.approval, statement: String(statement), rationale: t.arguments.rationale } };
  }
  const renamed = { ...answer, tool: t.dbTool } as CallAnswer;
  if (t.dbTool === 'db_schema' && renamed.ok) return { ...renamed, result: { database, schema: renamed.result } };
  return renamed;
}
