// Parking a call, resuming it once a person decided and parking it again when its effect changed
// (a superseded approval) are one job's life around one switch on its approval's state, sharing
// the job's sleep. The first park's checks and record are in first-park.ts, an approved call's
// run in approved-release.ts, the decision's audit row in decision-audit.ts; what an effect is and how it is previewed live in parked-effect.ts
// and sqlite/sqlite-effect.ts.
import type { Tracer } from '@opentelemetry/api';
import { DelayedError, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { eventSummary } from '../approvals/approval-summary.ts';
import { approvalDigest, approvalIdFor, MAX_APPROVAL_ROUNDS, type Approval, type ApprovalRequest } from '../approvals/approval.ts';
import { effectChangeNote } from '../approvals/effect-change.ts';
import type { CallJobData } from '../contracts/call.ts';
import { callerSinceOf, callKeyOf } from '../contracts/call-identity.ts';
import type { DropObject } from '../contracts/drop-object.ts';
import type { Effect } from '../contracts/effect.ts';
import { appendEvent, execEvent, publishEvent } from '../redis/events.ts';
import type { Keys } from '../redis/keys.ts';
import { AgentKeyRing } from '../registry/agent-keys.ts';
import { AgentRegistry } from '../registry/agents.ts';
import { recordApprovalWait } from '../tracing.ts';
import { failedRun, type ParkOutcome, type RunOutcome } from './call-runner.ts';
import type { Approved } from './exec-request.ts';
import { auditDecision } from './decision-audit.ts';
import { approvalFields, type FirstParkDeps, firstPark, oversizeRefusal } from './first-park.ts';
import { type ReleaseDeps, releaseApproved } from './approved-release.ts';
import { jsonBytes } from './redis-bytes.ts';
import { WorkspaceRedisBudget } from './workspace-redis-budget.ts';

/**
 * What an approval record costs Redis beside its JSON: its entries in the service-wide pending and
 * all-approvals indexes and in its workspace's pending, then decided, index (about 100 bytes each).
 */
const APPROVAL_OVERHEAD_BYTES = 768;

/**
 * What parking needs from the worker: the first park's (the approval store, its TTL, the shard's
 * executor, which also writes the decision into the database's own audit table, the config and
 * the byte quota), the release's (a logger), and the events' connection.
 */
export interface ParkingDeps extends FirstParkDeps, ReleaseDeps {
  redis: Redis;
  keys: Keys;
  /** With tracing on: each decided approval's wait becomes a span of its call's trace. */
  tracer?: Tracer;
}

/**
 * Parking a call that needs a person, and picking it up again. A parked call is the same
 * BullMQ job, moved to `delayed` until its approval expires: it holds no worker slot and no
 * lock while it waits, survives every restart with Redis, and is woken early by `promote()`
 * when someone decides. Delayed-until-expiry (rather than a job of its own, or a flow) keeps
 * one job per call for its whole life, with its id the call's key, so the caller's wait and
 * `result()` need know nothing about approvals.
 *
 * A woken job goes through the worker's whole path again (validate, authorize, guard) and comes
 * back here. Its approval is derived from its own key, never read from job data, and is used
 * only while it still describes this very call (its digest): no job can borrow another call's
 * approval, and a call whose payload changed meanwhile runs nothing.
 */
export class CallParking {
  private readonly keyRing: AgentKeyRing;
  private readonly budget: WorkspaceRedisBudget;

  constructor(private readonly deps: ParkingDeps) {
    this.keyRing = new AgentKeyRing(deps.redis, deps.keys, new AgentRegistry(deps.redis, deps.keys));
    this.budget = new WorkspaceRedisBudget(deps.redis, deps.keys);
  }

  /**
   * Takes a call that needs a person: parks it the first time (after checking it would run),
   * and on a later wake-up runs it when approved, finishes it when rejected or expired, or parks
   * it again when woken for nothing. Returns the outcome, or throws DelayedError once parked.
   */
  async handle(job: Job<CallJobData>, token: string, parked: ParkOutcome, run: (approved: Approved) => Promise<RunOutcome | ParkOutcome>): Promise<RunOutcome> {
    const { plan, request } = { plan: parked.park, request: parked.request };
    const key = callKeyOf(job.data);
    const fields = approvalFields(plan);
    const digest = approvalDigest(fields);
    let approval = await this.deps.store.current(key);
    if (!approval) {
      const oversize = oversizeRefusal(this.deps.config, plan);
      if (oversize) {
        // Its job stays RESULT_TTL_HOURS for its answer: without the arguments nobody may run.
        await job.updateData({ ...job.data, arguments: {} });
        return oversize;
      }
      const first = await firstPark(this.deps, key, digest, fields, plan, request);
      if ('envelope' in first) return first;
      approval = first.approval;
      if (first.created) {
        await this.noteApproval(approval, key);
        this.deps.logger.child({ callId: job.id }).info({ tool: plan.tool, approvalId: approval.id }, 'call parked for approval');
        await this.requested(job, approval, approval.createdAt);
        return this.sleep(job, token, approval);
      }
    }
    if (approval.callKey !== key || approval.digest !== digest) {
      return failedRun(
        job.data,
        'IDEMPOTENCY_CONFLICT',
        `call ${JSON.stringify(job.data.callId)} was already parked for approval with another statement; this one did not run.`,
      );
    }
    if (this.deps.tracer && approval.state !== 'pending') recordApprovalWait(this.deps.tracer, { ...approval, tool: plan.tool, callId: job.data.callId });
    return this.resume(job, token, approval, run);
  }

  /** Runs, finishes or re-parks a woken call by its approval's state. */
  private async resume(
    job: Job<CallJobData>,
    token: string,
    approval: Approval,
    run: (approved: Approved) => Promise<RunOutcome | ParkOutcome>,
  ): Promise<RunOutcome> {
    const { store } = this.deps;
    const { id } = approval;
    const finish = (code: 'APPROVAL_EXPIRED' | 'APPROVAL_REJECTED', detail: string) => failedRun(job.data, code, detail);
    switch (approval.state) {
      case 'pending': {
        if (Date.now() < approval.expiresAt) {
          // A worker SIGKILLed after it made the approval and before it announced it leaves the
          // record alone; the job's next run finds it here, and nobody following the events was
          // ever asked (session 34, D1). Announced now (once more for one made before the mark).
          if (!(await store.requestedAnnounced(id))) {
            await this.noteApproval(approval, approval.round && approval.round > 1 ? `${approval.callKey}\n${approval.round}` : approval.callKey);
            await this.requested(job, approval, approval.createdAt);
          }
          return this.sleep(job, token, approval);
        }
        const result = await store.transition(id, 'expired');
        if (result === 'NOT_YET') return this.sleep(job, token, approval);
        const now = await store.get(id);
        // Decided at the last moment, or gone: fail closed unless it is there and decided.
        if (result === 'CONFLICT' && now) return this.resume(job, token, now, run);
        const expired = now ?? approval;
        if (this.deps.tracer)
          recordApprovalWait(this.deps.tracer, { ...expired, state: 'expired', decidedAt: Date.now(), tool: job.data.tool, callId: job.data.callId });
        await publishEvent(this.deps.redis, this.deps.keys.events, {
          type: 'approval.decided',
          callId: job.data.callId,
          approval: eventSummary(expired),
          at: Date.now(),
        });
        await auditDecision(this.deps, expired, job.data);
        return finish('APPROVAL_EXPIRED', `Nobody decided by ${new Date(approval.expiresAt).toISOString()}.`);
      }
      case 'superseded':
        // `current` follows a superseded approval to the next; one whose next is gone ran nothing.
        return failedRun(
          job.data,
          'APPROVAL_STALE',
          `Approval ${id} was superseded by ${approval.supersededBy ?? 'another'}, which is gone; nothing ran. Send the call again.`,
        );
      case 'expired':
        return finish('APPROVAL_EXPIRED', `Nobody decided by ${new Date(approval.expiresAt).toISOString()}.`);
      case 'rejected':
        await auditDecision(this.deps, approval, job.data);
        return finish(
          'APPROVAL_REJECTED',
          // The registry's message already says it did not run.
          `Rejected by ${approval.decidedBy}${approval.reason ? `: ${approval.reason}` : ' (no reason given).'}`,
        );
      case 'approved': {
        const released = await releaseApproved(this.deps, this.keyRing, job, approval, run);
        return 'reparkWith' in released ? this.supersede(job, token, approval, released.reparkWith) : released;
      }
    }
  }

  /**
   * An approved call whose effect changed before it ran (nothing ran): its approval becomes
   * `superseded` and the call parks again under a new one (the next round, derived from its key)
   * with the effect it has now and a note of what changed. A person approves exactly what commits.
   */
  private async supersede(job: Job<CallJobData>, token: string, old: Approval, now: { effect: Effect; object?: DropObject }): Promise<RunOutcome> {
    const { store } = this.deps;
    const round = (old.round ?? 1) + 1;
    const note = effectChangeNote(old.id, old.effect, now.effect);
    if (round > MAX_APPROVAL_ROUNDS)
      return failedRun(job.data, 'APPROVAL_STALE', `${note} It was approved ${MAX_APPROVAL_ROUNDS} times and changed each time; send it again.`);
    const at = Date.now();
    const { approval, created } = await store.create({
      ...requestOf(old),
      id: approvalIdFor(old.callKey, round, old.id === approvalIdFor(old.callKey, old.round ?? 1) ? '' : await store.epoch()),
      round,
      supersedes: old.id,
      effect: now.effect,
      effectNote: note,
      ...(now.object ? { object: now.object } : {}),
      createdAt: at,
      expiresAt: at + this.deps.approvalTtlMs,
    });
    // Noted and announced before the old approval is marked superseded, whether this run made the
    // new record or found it: a run that made it and was SIGKILLed before the mark runs again and
    // comes back here (`current` still stands on the old one), and skipping the announce when the
    // record was found left the runtime never told the call was asked again (session 34, D1). Once
    // marked, `current` leads past this step; a kill just before the mark announces twice.
    await this.noteApproval(approval, `${old.callKey}\n${round}`);
    if (created) {
      this.deps.logger
        .child({ callId: job.id })
        .info({ tool: approval.tool, approvalId: approval.id, supersedes: old.id }, 'approved call parked again: its effect changed');
    }
    const superseded = { ...old, state: 'superseded' as const, supersededBy: approval.id };
    await publishEvent(this.deps.redis, this.deps.keys.events, { type: 'approval.decided', callId: job.data.callId, approval: eventSummary(superseded), at });
    await this.requested(job, approval, approval.createdAt);
    await store.recordRun(old.id, { ok: false, code: 'APPROVAL_STALE', message: note, at });
    await store.supersede(old.id, approval.id);
    await auditDecision(this.deps, old, job.data, { ok: false, code: 'APPROVAL_STALE' });
    return this.sleep(job, token, approval);
  }

  /**
   * Counts a new approval record in its workspace's Redis budget, under `entry` (the call's key, or
   * one per later round). The record outlives the job: kept APPROVAL_RETENTION_DAYS after it expires.
   */
  private async noteApproval(approval: Approval, entry: string): Promise<void> {
    const until = approval.expiresAt + this.deps.config.approvalRetentionDays * 24 * 3600 * 1000;
    await this.budget.note(approval.workspace, [{ callKey: entry, kind: 'approval', bytes: jsonBytes(approval) + APPROVAL_OVERHEAD_BYTES, until }]);
  }

  /**
   * Announces `approval` of `job`'s call (`approval.requested`), with what its caller is bound to:
   * a client's wait listens by the call's key, which holds it (`callKey`); then marks it announced.
   */
  private async requested(job: Job<CallJobData>, approval: Approval, at: number): Promise<void> {
    const since = callerSinceOf(job.data);
    const event = {
      type: 'approval.requested' as const,
      callId: job.data.callId,
      approval: eventSummary(approval),
      ...(since !== undefined ? { memberSince: since } : {}),
      at,
    };
    // One transaction: a reader that sees the event sees the mark (a runtime told of it, then
    // asking, must not find the call unannounced), and a crash leaves neither or both.
    const multi = appendEvent(this.deps.redis.multi(), this.deps.keys.events, event);
    await execEvent(this.deps.store.markRequested(multi, approval.id));
  }

  /**
   * Delays the job until the approval expires. A decision made while we were parking found no
   * delayed job to promote; reading the state once more after the move catches it. Only once
   * the decision is announced, though: until then its decider has yet to publish
   * `approval.decided` and wake the job itself (now delayed, so its wake-up finds it), and a
   * call woken here would complete before its decision was heard of.
   */
  private async sleep(job: Job<CallJobData>, token: string, approval: Approval): Promise<never> {
    await job.moveToDelayed(approval.expiresAt, token);
    const now = await this.deps.store.get(approval.id);
    if (now && now.state !== 'pending' && (await this.deps.store.announced(approval.id))) await job.promote().catch(() => undefined);
    throw new DelayedError();
  }
}

/** The request an approval was made from, without its decision. */
function requestOf(a: Approval): ApprovalRequest {
  const { state: _s, decidedBy: _b, decidedAt: _a, decidedVia: _v, reason: _r, supersededBy: _n, ran: _x, ...request } = a;
  return request;
}
