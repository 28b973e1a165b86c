import type { ApprovalStore } from '../approvals/approval-store.ts';
import { approvalIdFor, type Approval } from '../approvals/approval.ts';
import type { Config } from '../config.ts';
import type { DropObject } from '../contracts/drop-object.ts';
import type { Effect } from '../contracts/effect.ts';
import { okEnvelope } from '../contracts/envelope.ts';
import { TOOL_TIERS } from '../contracts/tools.ts';
import { AgentDbError } from '../errors.ts';
import type { ExecOutcome, ExecRequest } from '../executor/executor-protocol.ts';
import type { CallPlan } from '../policy/call-plan.ts';
import { CREDITS } from '../policy/credits.ts';
import type { RecordedEffect, RecordedOutcome } from '../sqlite/call-record.ts';
import { dropEffect } from '../sqlite/drop-effect.ts';
import { parseDatabaseId } from '../contracts/database-id.ts';
import type { WorkspaceQuota } from '../history/workspace-quota.ts';
import { failedRun, type RunOutcome } from './call-runner.ts';
import { previewParked } from './parked-effect.ts';
import { jsonBytes } from './redis-bytes.ts';

// A call's first park: the checks before a person is asked (its size, SQLite's own verdict, the
// effect a write would have) and the approval record they lead to. CallParking calls it once per
// call; a woken call reads the record back instead.

/** What the first park needs from the worker (a part of `ParkingDeps`). */
export interface FirstParkDeps {
  store: ApprovalStore;
  approvalTtlMs: number;
  executor: { run(req: ExecRequest): Promise<ExecOutcome> };
  config: Config;
  /** A workspace's byte quota: no person is asked about a write it would refuse once approved. */
  quota?: Pick<WorkspaceQuota, 'writesRefusal'>;
}

/** What an approval records of its call, bound by its digest ({@link approvalFields}). */
export type ApprovalFields = ReturnType<typeof approvalFields>;

/** What an approval records of the call it is asked about, and binds with its digest. */
export function approvalFields(plan: CallPlan) {
  return {
    workspace: plan.request.workspace,
    agent: plan.request.agent,
    database: plan.databaseId,
    tool: plan.tool,
    tier: TOOL_TIERS[plan.tool] as 'write' | 'destructive',
    ...(typeof plan.args.sql === 'string' ? { sql: plan.args.sql } : {}),
    ...(Array.isArray(plan.args.params) ? { params: plan.args.params as unknown[] } : {}),
    ...(typeof plan.args.table === 'string' ? { table: plan.args.table } : {}),
  };
}

/**
 * Checks that a call would run (a person is only asked about such calls), then records its
 * approval. `created` is false when a retried park finds the record it made before.
 */
export async function firstPark(
  deps: FirstParkDeps,
  key: string,
  digest: string,
  fields: ApprovalFields,
  plan: CallPlan,
  request: ExecRequest,
): Promise<{ approval: Approval; created: boolean } | RunOutcome> {
  const data = { callId: plan.request.callId ?? '', tool: plan.tool };
  if (request.op === 'write' || request.op === 'drop') {
    // Already committed under this key: its record answers, and nobody is asked again. Redis lost
    // the call's job and approval after it ran (it came back empty), and the caller sent it again
    // under its id (review R2: it was parked again, and a rejection would have answered
    // APPROVAL_REJECTED for a write that was in the database).
    const recorded: RecordedEffect = request.op === 'write' ? ['write', request.sql, request.params] : ['drop', request.table];
    const found = await deps.executor.run({ op: 'recorded', db: request.db, callKey: key, effect: recorded });
    if (found.ok && (found.result as RecordedOutcome).committed) {
      return {
        envelope: okEnvelope(data.callId, plan.tool, CREDITS[plan.tool], (found.result as RecordedOutcome).result as Record<string, unknown>),
        meter: undefined,
      };
    }
  }
  // After the record: a committed write sent again answers what it did, never QUOTA_EXCEEDED.
  const overQuota = request.op === 'write' && deps.quota ? await deps.quota.writesRefusal(parseDatabaseId(plan.databaseId).workspace) : undefined;
  if (overQuota !== undefined) return failedRun(data, 'QUOTA_EXCEEDED', overQuota);
  let object: DropObject | undefined;
  let effect: { effect: Effect | null; effectNote?: string } | undefined;
  // SQLite's own verdict too. A write's missing table is no refusal (an earlier parked CREATE
  // may make it before this runs), but a drop of nothing is answered NOT_FOUND now: nobody
  // should have to approve it. A drop records what it would remove, as the person sees it.
  if (request.op === 'write') {
    const check = await deps.executor.run({ op: 'check', db: request.db, sql: request.sql, mode: 'write' });
    if (!check.ok && check.unsettled) throw new AgentDbError(check.error.code, check.error.detail);
    if (!check.ok && check.error.code !== 'SQL_ERROR') return failedRun(data, check.error.code, check.error.detail);
    effect = await previewParked(deps.executor, deps.config, request, plan.args);
  } else if (request.op === 'drop') {
    const check = await deps.executor.run({ op: 'checkDrop', db: request.db, table: request.table });
    // No verdict (no database process could start): a fault, so the job runs again.
    if (!check.ok && check.unsettled) throw new AgentDbError(check.error.code, check.error.detail);
    if (!check.ok) return failedRun(data, check.error.code, check.error.detail);
    object = check.result as DropObject;
    effect = { effect: dropEffect(object) };
  }
  const now = Date.now();
  return deps.store.create({
    ...fields,
    id: approvalIdFor(key, 1, await deps.store.epoch()),
    callId: data.callId,
    callKey: key,
    digest,
    shard: plan.shard,
    shared: plan.target.agent === undefined,
    ...(typeof plan.args.rationale === 'string' ? { rationale: plan.args.rationale } : {}),
    ...(object ? { object } : {}),
    ...effect,
    requester: plan.request.agent,
    createdAt: now,
    expiresAt: now + deps.approvalTtlMs,
  });
}

/**
 * LIMIT_EXCEEDED when a call that would wait for a person carries more than
 * MAX_PARKED_CALL_BYTES: its job would wait in Redis, and its approval record stay a month,
 * both with the SQL and params (issue 27: 40 parked writes of a 1 MB param put 86 MB there).
 */
export function oversizeRefusal(config: Config, plan: CallPlan): RunOutcome | undefined {
  const bytes = jsonBytes(plan.args);
  const max = config.maxParkedCallBytes;
  if (bytes <= max) return undefined;
  return failedRun(
    { callId: plan.request.callId ?? '', tool: plan.tool },
    'LIMIT_EXCEEDED',
    `this call needs a person's approval, and a call that waits for one may carry at most ${max} bytes of arguments as JSON (MAX_PARKED_CALL_BYTES); it has ${bytes}. Nothing ran: send fewer rows or smaller values per call`,
  );
}
