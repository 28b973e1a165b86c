import { DelayedError, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { CallJobData } from '../contracts/call.ts';
import { errorEnvelope } from '../contracts/envelope.ts';
import { TOOL_TIERS } from '../contracts/tools.ts';
import type { ApprovalStore } from '../approvals/approval-store.ts';
import { approvalIdFor, type Approval } from '../approvals/approval.ts';
import { summary } from '../approvals/approval-service.ts';
import type { CallPlan } from './call-plan.ts';
import { dbTarget, type ParkOutcome, type RunOutcome } from './call-runner.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import { parseDatabaseId } from '../store/database-id.ts';
import type { ExecOutcome, ExecRequest } from '../store/executor-protocol.ts';
import { publishEvent } from './events.ts';
import type { Keys } from './keys.ts';

/** What parking needs from the worker. */
export interface ParkingDeps {
  store: ApprovalStore;
  redis: Redis;
  keys: Keys;
  approvalTtlMs: number;
  /** The shard's executor, which writes the decision into the database's own audit table. */
  executor: { run(req: ExecRequest): Promise<ExecOutcome> };
  config: Config;
  logger: Logger;
}

/** The job data of a parked call: the call, and the approval it waits on. */
type ParkedData = CallJobData & { approvalId?: string };

/**
 * Parking a call that needs a person, and picking it up again. A parked call is the same
 * BullMQ job, moved to `delayed` until its approval expires: it holds no worker slot and no
 * lock while it waits, survives every restart with Redis, and is woken early by `promote()`
 * when someone decides. Delayed-until-expiry (rather than a job of its own, or a flow) keeps
 * one job per call for its whole life, with its id the call id, so the caller's wait and
 * `result()` need know nothing about approvals.
 */
export class CallParking {
  constructor(private readonly deps: ParkingDeps) {}

  /** Records the approval, announces it and parks the job. Never returns: throws DelayedError. */
  async park(job: Job<ParkedData>, token: string, plan: CallPlan): Promise<never> {
    const { store, approvalTtlMs } = this.deps;
    const now = Date.now();
    const data = job.data;
    const approval = await store.create({
      id: approvalIdFor(data.callId),
      callId: data.callId,
      shard: plan.shard,
      workspace: plan.request.workspace,
      agent: plan.request.agent,
      tool: plan.tool,
      tier: TOOL_TIERS[plan.tool] as 'write' | 'destructive',
      database: plan.databaseId,
      shared: plan.target.agent === undefined,
      ...(typeof plan.args.sql === 'string' ? { sql: plan.args.sql } : {}),
      ...(Array.isArray(plan.args.params) ? { params: plan.args.params } : {}),
      ...(typeof plan.args.table === 'string' ? { table: plan.args.table } : {}),
      ...(typeof plan.args.rationale === 'string' ? { rationale: plan.args.rationale } : {}),
      requester: plan.request.agent,
      createdAt: now,
      expiresAt: now + approvalTtlMs,
    });
    await job.updateData({ ...data, approvalId: approval.id });
    await publishEvent(this.deps.redis, this.deps.keys.events, {
      type: 'approval.requested',
      callId: data.callId,
      approval: summary(approval),
      at: now,
    });
    return this.sleep(job, token, approval);
  }

  /**
   * Picks a parked job up again (a decision promoted it, or its expiry came): runs it when
   * approved, finishes it when rejected or expired, parks it again when woken for nothing.
   */
  async resume(job: Job<ParkedData>, token: string, run: () => Promise<RunOutcome | ParkOutcome>): Promise<RunOutcome> {
    const { store } = this.deps;
    const { callId, tool } = job.data;
    const id = job.data.approvalId!;
    const approval = await store.get(id);
    const finish = (code: 'APPROVAL_EXPIRED' | 'APPROVAL_REJECTED' | 'INTERNAL', detail: string): RunOutcome => ({
      envelope: errorEnvelope(callId, tool, code, detail),
      meter: undefined,
    });
    // Fail closed: without its record nobody can have approved the call.
    if (!approval) return finish('APPROVAL_EXPIRED', `Approval ${id} is gone.`);
    switch (approval.state) {
      case 'pending': {
        if (Date.now() < approval.expiresAt) return this.sleep(job, token, approval);
        const result = await store.transition(id, 'expired');
        if (result === 'NOT_YET') return this.sleep(job, token, approval);
        if (result === 'CONFLICT') return this.resume(job, token, run); // decided at the last moment
        const expired = (await store.get(id)) ?? approval;
        await publishEvent(this.deps.redis, this.deps.keys.events, {
          type: 'approval.decided',
          callId,
          approval: summary(expired),
          at: Date.now(),
        });
        await this.audit(expired, job.data);
        return finish('APPROVAL_EXPIRED', `Nobody decided by ${new Date(approval.expiresAt).toISOString()}.`);
      }
      case 'expired':
        return finish('APPROVAL_EXPIRED', `Nobody decided by ${new Date(approval.expiresAt).toISOString()}.`);
      case 'rejected':
        await this.audit(approval, job.data);
        return finish(
          'APPROVAL_REJECTED',
          // The registry's message already says it did not run.
          `Rejected by ${approval.decidedBy}${approval.reason ? `: ${approval.reason}` : ' (no reason given).'}`,
        );
      case 'approved': {
        const outcome = await run();
        if ('park' in outcome) return finish('INTERNAL', 'An approved call asked for approval again.');
        const { envelope } = outcome;
        const ran = { ok: envelope.ok, ...(envelope.ok ? {} : { code: envelope.error.code }) };
        await store.recordRun(id, { ...ran, at: Date.now() });
        await this.audit(approval, job.data, ran);
        return outcome;
      }
    }
  }

  /**
   * Keeps the decision in the database's own audit table, which backups and history carry.
   * The Redis record keeps it whatever happens here; a failure (a full disk) is logged loudly.
   */
  private async audit(approval: Approval, job: CallJobData, ran?: { ok: boolean; code?: string }): Promise<void> {
    const target = parseDatabaseId(approval.database);
    const outcome = await this.deps.executor.run({
      op: 'audit',
      db: dbTarget(this.deps.config, approval.database, target, approval.shard, job.settings.plan),
      entry: {
        approvalId: approval.id,
        callId: approval.callId,
        tool: approval.tool,
        tier: approval.tier,
        statement: approval.sql ?? approval.table ?? '',
        params: approval.params,
        requester: approval.requester,
        decision: approval.state as 'approved' | 'rejected' | 'expired',
        decidedBy: approval.decidedBy,
        decidedAt: approval.decidedAt,
        reason: approval.reason,
        ranOk: ran?.ok,
        ranCode: ran?.code,
        at: Date.now(),
      },
    });
    if (!outcome.ok) this.deps.logger.error({ callId: approval.callId, code: outcome.error.code }, 'could not write the decision audit');
  }

  /**
   * Delays the job until the approval expires. A decision made while we were parking found no
   * delayed job to promote; reading the state once more after the move catches it.
   */
  private async sleep(job: Job<ParkedData>, token: string, approval: Approval): Promise<never> {
    await job.moveToDelayed(approval.expiresAt, token);
    const now = await this.deps.store.get(approval.id);
    if (now && now.state !== 'pending') await job.promote().catch(() => undefined);
    throw new DelayedError();
  }
}
