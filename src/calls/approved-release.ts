import type { Job } from 'bullmq';
import type { ApprovalStore } from '../approvals/approval-store.ts';
import { MAX_APPROVAL_ROUNDS, type Approval } from '../approvals/approval.ts';
import type { CallJobData } from '../contracts/call.ts';
import { parseDatabaseId } from '../contracts/database-id.ts';
import type { DropObject } from '../contracts/drop-object.ts';
import type { Effect } from '../contracts/effect.ts';
import { UNREGISTERED_PLAN } from '../contracts/settings.ts';
import type { ErrorCode } from '../errors.ts';
import { standingRefusal } from '../policy/standing-refusal.ts';
import type { AgentKeyRing } from '../registry/agent-keys.ts';
import { CALL_RECORD_RETENTION_MS, type RecordedEffect, type RecordedOutcome } from '../sqlite/call-record.ts';
import type { Param } from '../sqlite/sqlite-values.ts';
import { dropEffect } from '../sqlite/drop-effect.ts';
import { NO_ROWS_EFFECT } from '../sqlite/sqlite-effect.ts';
import { failedRun, type ParkOutcome, type RunOutcome } from './call-runner.ts';
import { type AuditDeps, auditDecision } from './decision-audit.ts';
import { type Approved, dbTarget } from './exec-request.ts';
import { approvedArgs, effectLimits } from './parked-effect.ts';

/** How long after an approved call ran a resend may replay it: well inside the record's retention. */
const REPLAYABLE_MS = CALL_RECORD_RETENTION_MS - 24 * 3600 * 1000;

/** What releasing an approved call needs from the worker (a part of `ParkingDeps`). */
export interface ReleaseDeps extends AuditDeps {
  store: ApprovalStore;
}

/** An approved call whose effect changed before it ran: nothing ran, and it is asked about again with this. */
export interface Repark {
  reparkWith: { effect: Effect; object?: DropObject };
}

/**
 * Releases a call a person approved (`CallParking` woke it): runs it once, bound to the effect
 * approved, unless the approval was spent long ago, or its key or agent changed since it was
 * parked (`standingRefusal`). Records the run in the approval and the database's audit table.
 * A call whose effect changed answers {@link Repark}: `CallParking.supersede` parks it again.
 */
export async function releaseApproved(
  deps: ReleaseDeps,
  keyRing: AgentKeyRing,
  job: Job<CallJobData>,
  approval: Approval,
  run: (approved: Approved) => Promise<RunOutcome | ParkOutcome>,
): Promise<RunOutcome | Repark> {
  // An approval lets its call run once. A resend after it ran replays the exactly-once
  // record while the database keeps it; past that, running it again would be a second
  // effect nobody approved (the approval outlives the job and the record).
  if (approval.ran && Date.now() - approval.ran.at > REPLAYABLE_MS) {
    return failedRun(
      job.data,
      'APPROVAL_EXPIRED',
      `Approval ${approval.id} was used when the call ran at ${new Date(approval.ran.at).toISOString()}; its result has expired. Send the call again under a new call id.`,
    );
  }
  if (approval.ran?.ok) {
    const gone = await runUndone(deps, job, approval);
    if (gone) return failedRun(job.data, 'APPROVAL_STALE', gone);
  }
  // Refused at release once: the approval is spent, whatever the registry says now.
  if (approval.ran?.detail !== undefined) return failedRun(job.data, (approval.ran.code ?? 'NOT_PERMITTED') as ErrorCode, approval.ran.detail);
  const refusal = await standingRefusal(keyRing, deps.config, job.data, approval.database);
  if (refusal) {
    const detail = `Approved by ${approval.decidedBy ?? 'a member'}, but it did not run: since it was parked, ${refusal}`;
    const ran = { ok: false, code: 'NOT_PERMITTED', detail };
    await deps.store.recordRun(approval.id, { ...ran, at: Date.now() });
    await auditDecision(deps, approval, job.data, ran);
    deps.logger.child({ callId: job.id }).warn({ approvalId: approval.id }, 'approved call refused at release: its key or agent changed');
    return failedRun(job.data, 'NOT_PERMITTED', detail);
  }
  const outcome = await run({
    ...(approval.decidedBy ? { by: approval.decidedBy } : {}),
    ...(approval.object ? { expect: approval.object } : {}),
    // A write approved without an effect (`effect: null`: its preview failed or ran out of
    // time) is bound to changing no rows: if it would change any, nothing commits and it
    // parks again with the effect it has, so nobody approves a change unseen.
    ...(approval.sql !== undefined && approval.effect !== undefined
      ? { effect: { digest: (approval.effect ?? NO_ROWS_EFFECT).digest, limits: effectLimits(deps.config, approvedArgs(approval)) } }
      : {}),
  });
  if ('park' in outcome) return failedRun(job.data, 'INTERNAL', 'An approved call asked for approval again.');
  if (outcome.effectChanged) return { reparkWith: { effect: outcome.effectChanged } };
  if (!outcome.envelope.ok && outcome.envelope.error.code === 'APPROVAL_STALE' && approval.object && approval.round !== MAX_APPROVAL_ROUNDS) {
    // A drop whose table changed since: asked again about the table as it is now, if any.
    const check = await deps.executor.run({
      op: 'checkDrop',
      db: dbTarget(deps.config, approval.database, parseDatabaseId(approval.database), approval.shard, job.data.plan ?? UNREGISTERED_PLAN),
      table: approval.table ?? '',
    });
    if (check.ok) {
      const object = check.result as DropObject;
      return { reparkWith: { effect: dropEffect(object), object } };
    }
  }
  const { envelope } = outcome;
  const ran = { ok: envelope.ok, ...(envelope.ok ? {} : { code: envelope.error.code }) };
  // The message goes on the record only: the audit row keeps the code, as it always has.
  const message = envelope.ok ? undefined : envelope.error.message.slice(0, 1024);
  await deps.store.recordRun(approval.id, { ...ran, ...(message ? { message } : {}), at: Date.now() });
  await auditDecision(deps, approval, job.data, ran);
  return outcome;
}

/** Asks the approved call's database for its exactly-once record: whether the approved effect committed under its key. */
function recordOf(deps: ReleaseDeps, job: Job<CallJobData>, approval: Approval) {
  const effect: RecordedEffect = approval.sql !== undefined ? ['write', approval.sql, (approval.params ?? []) as Param[]] : ['drop', approval.table ?? ''];
  return deps.executor.run({
    op: 'recorded',
    db: dbTarget(deps.config, approval.database, parseDatabaseId(approval.database), approval.shard, job.data.plan ?? UNREGISTERED_PLAN),
    callKey: approval.callKey,
    effect,
  });
}

/**
 * Why an approved call that committed once may not run again: its database no longer holds the
 * run's exactly-once record (restored in place to before it, or removed), so running it would
 * commit a second time what a person approved once (session 34, D1: a resend under its id after
 * a restore and the result's expiry did). Undefined while the record is there (the run replays
 * it) or cannot be read (the run itself then answers).
 */
async function runUndone(deps: ReleaseDeps, job: Job<CallJobData>, approval: Approval): Promise<string | undefined> {
  const found = await recordOf(deps, job, approval);
  if (!found.ok || (found.result as RecordedOutcome).committed) return undefined;
  return `Approval ${approval.id} was used when the call ran at ${new Date(approval.ran!.at).toISOString()}, and its database no longer holds that run (restored to before it, or removed): it did not run again, since one approval runs its call once. Send the call again under a new call id to ask a person again.`;
}

/**
 * Settles the approval of a call whose job BullMQ failed as stalled twice (its workers killed or
 * stopped twice while it ran: session 34, D2), from the database's exactly-once record: the job's
 * own answer is lost, and the approval would otherwise say `approved` with no outcome until the
 * agent sent the call again. Committed: it ran ok. Not committed (as of now: a worker only
 * stopped could still go on) or not readable: it says so, and that the same call id sends it
 * again, which runs it (or replays the record), so the approval is not spent by this answer.
 * An approval that already has its run (recorded before the stall) is left as it is. A write or
 * drop that committed is, since session 35 (F14), answered from its record by the job's own last
 * run (`lost-run-replay.ts`), which records its run and audit row as a run does; this settles the
 * rest (and the committed one whose record that run could not read, but this read can).
 */
export async function settleLostRun(deps: ReleaseDeps, job: Job<CallJobData>): Promise<void> {
  const approval = await deps.store.current(job.id!);
  if (approval?.state !== 'approved' || approval.ran) return;
  const found = await recordOf(deps, job, approval);
  const lost = `its workers stopped answering while it ran (killed or stopped twice), so its own answer is lost`;
  const resend = `Send the call again under the same call id (${job.data.callId}) for its outcome: it runs then, once.`;
  const ran = !found.ok
    ? {
        ok: false,
        code: 'UNAVAILABLE',
        message: `It is not known whether it committed: ${lost}, and its database's record could not be read (${found.error.code}). ${resend}`,
      }
    : (found.result as RecordedOutcome).committed
      ? { ok: true, message: `It committed (read from its database's exactly-once record): ${lost}. Sent again under its call id, it answers that outcome.` }
      : { ok: false, code: 'UNAVAILABLE', message: `It had not committed when its database was read: ${lost}. ${resend}` };
  await deps.store.recordRun(approval.id, { ...ran, at: Date.now() });
  // The decision's row in the database's own audit table, as a run writes it (keyed by the
  // approval: the resend's run writes over it); left until that resend before (session 35, F14).
  await auditDecision(deps, approval, job.data, { ok: ran.ok, ...(ran.code ? { code: ran.code } : {}) });
}
