import type { Job } from 'bullmq';
import type { CallJobData } from '../contracts/call.ts';
import { errorEnvelope, type Envelope } from '../contracts/envelope.ts';
import { ERRORS, isErrorCode } from '../errors.ts';
import { readsOnly } from './lost-run-replay.ts';

// What a call or a result lookup answers, and the small helpers that build those answers: the
// client's answer types, kept apart from the client that produces them.

/**
 * A finished call's envelope, typed so that `status` tells it from the answers below
 * (`answer.status === 'awaiting_approval'` narrows to {@link AwaitingAnswer}).
 */
export type FinishedAnswer = Envelope & {
  /** Absent on a finished call: what tells it from a queued, running or parked one. */
  status?: undefined;
};

/** A call that is on its way but not finished: queued or running. */
export interface PendingAnswer {
  /** Always false: the call has not finished, so there is no result yet. */
  ok: false;
  /** The call id to look it up by (`client.result()`) or wait on again. */
  callId: string;
  /** The tool called, as the caller named it. */
  tool: string;
  /** `queued`: no worker has picked it up yet; `running`: a worker runs it now. */
  status: 'queued' | 'running';
}

/** A call parked until a person decides. */
export interface AwaitingAnswer {
  /** Always false: the call has not run; it waits for a decision. */
  ok: false;
  /** The call id: its decision, and then its answer, are found by it. */
  callId: string;
  /** The tool called, as the caller named it. */
  tool: string;
  /** The call is parked until a person approves or rejects it (or the approval expires). */
  status: 'awaiting_approval';
  /** The approval request: its `id` (to decide it), the `tier` that asked for it, `expiresAt` (ISO time), and the write's effect when known. */
  approval: { id: string; tier: string; expiresAt: string } & Record<string, unknown>;
}

/** How `decide()` proves who decides: a member's key, or an operator naming the member. */
export type Decision =
  | {
      /** Whether the parked call runs (`approve`) or is refused (`reject`). */
      decision: 'approve' | 'reject';
      /** The deciding member's key. */
      key: string;
      /** Why, kept with the approval record. */
      reason?: string;
    }
  | {
      /** Whether the parked call runs (`approve`) or is refused (`reject`). */
      decision: 'approve' | 'reject';
      /** The member an operator (a trusted runtime) decides for. */
      by: string;
      /** Marks a decision made by the operator, not with a member's key. */
      operator: true;
      /** Why, kept with the approval record. */
      reason?: string;
    };

/**
 * Whatever a call or a result lookup can answer: narrow on `ok` (true: ran) and on `status`
 * (absent: finished; `queued`, `running`, `awaiting_approval`: not yet).
 */
export type CallAnswer = FinishedAnswer | PendingAnswer | AwaitingAnswer;

/**
 * An answer that says nothing about the call, only about this moment: refused by a rate limit, or
 * agentdb (Redis) unreachable. It is no outcome: whoever waits for the call's outcome (an MCP task,
 * a resend window) keeps waiting and asks again.
 */
export function isTransient(answer: { ok: boolean; error?: { code: string } }): boolean {
  return !answer.ok && (answer.error?.code === 'RATE_LIMITED' || answer.error?.code === 'UNAVAILABLE');
}

/**
 * `promise`'s value, or undefined once `ms` have passed first. The timer is cleared when the
 * promise wins: a call answered in a millisecond must not leave a 30 s timer behind (at
 * thousands of calls a second they pile up, and all fire later in the middle of other work).
 */
export function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(undefined), ms).unref();
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

export function awaiting(callId: string, tool: string, approval: Record<string, unknown>): AwaitingAnswer {
  return {
    ok: false,
    callId,
    tool,
    status: 'awaiting_approval',
    approval: { ...approval, id: String(approval.id), tier: String(approval.tier), expiresAt: String(approval.expiresAt) },
  };
}

export function finishedEnvelope(job: Job<CallJobData, Envelope>): Envelope {
  return job.returnvalue ?? failedCallEnvelope(job.data, job.failedReason);
}

/** BullMQ's failedReason for a job failed by its stalled check (`maxStalledCount` passed). */
const STALLED = /^job stalled more than allowable limit$/;

/** Whether a failed job's reason is BullMQ's stalled check failing it (its workers lost it twice). */
export function stalledTwice(reason: string | undefined): boolean {
  return reason !== undefined && STALLED.test(reason);
}

/**
 * A fault whose call may have committed (a write whose database process died, or whose database
 * could not be opened on a full disk, and whose record could not be read: `death-answers.ts`,
 * `executor-dispatch.ts`): its retries spent, it is not answered as if nothing ran.
 */
const MAY_HAVE_COMMITTED = /whether it committed\b.*\bcould not be read/;

/**
 * The answer of a call whose job failed: it threw after its retries, a fault rather than an
 * outcome. A fault that is retryable by its code (an `AgentDbError`'s message starts with it:
 * UNAVAILABLE when no database process could start) answers with that code, so the caller tries
 * again (under the same id: a failed call runs again); anything else is INTERNAL.
 */
export function failedCallEnvelope(data: Pick<CallJobData, 'callId' | 'tool'>, reason: string | undefined): Envelope {
  // BullMQ fails a job that stalled past its limit: its workers lost it twice while it ran (a
  // process killed or stopped), so it may have run. Said as such: INTERNAL "failed" for writes
  // that had committed (F5's fault ledger, a worker SIGSTOPped 10 s, then the next SIGKILLed).
  if (stalledTwice(reason) && readsOnly(data.tool))
    // A read has no effect: whether it ran changes nothing for the caller (session 36, F15).
    return errorEnvelope(
      data.callId,
      data.tool,
      'UNAVAILABLE',
      `Call ${data.callId}'s workers stopped answering while it ran (${reason}): it is a read, so nothing was changed, and it is not run again by itself. Send it again under the same call id to run it.`,
    );
  if (stalledTwice(reason))
    return {
      ...errorEnvelope(
        data.callId,
        data.tool,
        'UNAVAILABLE',
        `Call ${data.callId}'s workers stopped answering while it ran (${reason}): it may have run. Send it again under the same call id for its outcome: a write that committed answers it, one that did not runs.`,
      ),
      mayStillRun: true,
    };
  const code = reason ? /^([A-Z_]+): /.exec(reason)?.[1] : undefined;
  if (isErrorCode(code) && ERRORS[code].retryable) {
    const envelope = errorEnvelope(data.callId, data.tool, code, reason!.slice(code.length + 2));
    return MAY_HAVE_COMMITTED.test(reason!) ? { ...envelope, mayStillRun: true } : envelope;
  }
  return errorEnvelope(data.callId, data.tool, 'INTERNAL', reason ? `The call failed: ${reason}` : 'The call failed.');
}
