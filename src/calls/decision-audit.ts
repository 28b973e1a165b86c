import type { Approval } from '../approvals/approval.ts';
import type { Config } from '../config.ts';
import type { CallJobData } from '../contracts/call.ts';
import { UNREGISTERED_PLAN } from '../contracts/settings.ts';
import { parseDatabaseId } from '../contracts/database-id.ts';
import type { ExecOutcome, ExecRequest } from '../executor/executor-protocol.ts';
import type { Logger } from '../logger.ts';
import { dbTarget } from './exec-request.ts';

/** What writing a decision's audit row needs from the worker (a part of `ParkingDeps`). */
export interface AuditDeps {
  executor: { run(req: ExecRequest): Promise<ExecOutcome> };
  config: Config;
  logger: Logger;
}

/**
 * Keeps the decision in the database's own audit table, which backups and history carry.
 * The Redis record keeps it whatever happens here; a failure (a full disk) is logged loudly.
 */
export async function auditDecision(
  deps: AuditDeps,
  approval: Approval,
  job: CallJobData,
  ran?: { ok: boolean; code?: string; detail?: string },
): Promise<void> {
  const target = parseDatabaseId(approval.database);
  const outcome = await deps.executor.run({
    op: 'audit',
    db: dbTarget(deps.config, approval.database, target, approval.shard, job.plan ?? UNREGISTERED_PLAN),
    entry: {
      approvalId: approval.id,
      callId: approval.callKey,
      tool: approval.tool,
      tier: approval.tier,
      statement: approval.sql ?? approval.table ?? '',
      params: approval.params,
      requester: approval.requester,
      decision: approval.state as 'approved' | 'rejected' | 'expired',
      decidedBy: approval.decidedBy,
      decidedVia: approval.decidedVia,
      decidedAt: approval.decidedAt,
      reason: approval.reason,
      ranOk: ran?.ok,
      ranCode: ran?.code,
      at: Date.now(),
    },
  });
  if (!outcome.ok) deps.logger.error({ callId: approval.callId, code: outcome.error.code }, 'could not write the decision audit');
}
