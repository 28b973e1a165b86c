import type { Redis } from 'ioredis';
import { EventReader } from '../redis/events.ts';
import type { StreamedEvent } from '../redis/event-types.ts';
import type { Approval } from './approval.ts';

/**
 * What became of an approved call soon after its decision: it ran (ok, or failed with a code),
 * it did not run because its data changed since the approval was asked and is asked again under
 * a new approval (`supersededBy`), or neither within the time followed.
 */
export type ApprovedOutcome = { ran: { ok: boolean; code?: string; message?: string } } | { askedAgain: string } | { pending: true };

/**
 * Follows the event stream from `from` (a position taken before the decision, so nothing is
 * missed) for up to `ms`, for what became of the call `approved` let run: its `call.completed`,
 * or its approval announced `superseded` (the run found the effect changed: nothing committed,
 * the call parked again). Review N6 (session 30): `agentdb approvals approve` said "it runs now"
 * of a call that then did not run and waited for a person again, which nothing told the approver.
 * @param reader a connection of its own: the stream is read blocking, and it is closed after.
 */
export async function approvedOutcome(reader: Redis, streamKey: string, from: string, approved: Approval, ms: number): Promise<ApprovedOutcome> {
  let settle!: (outcome: ApprovedOutcome) => void;
  const outcome = new Promise<ApprovedOutcome>((resolve) => {
    settle = resolve;
  });
  const events = new EventReader(reader, streamKey, from, (e: StreamedEvent) => {
    if (e.callId !== approved.callId) return;
    if (e.type === 'call.completed' && e.workspace === approved.workspace && e.agent === approved.agent) {
      const error = e.envelope && !e.envelope.ok ? e.envelope.error : undefined;
      settle({ ran: { ok: e.ok, ...(error ? { code: error.code, message: error.message } : {}) } });
    } else if (e.type === 'approval.decided' && e.approval.id === approved.id && e.approval.state === 'superseded') {
      settle({ askedAgain: String(e.approval.supersededBy ?? '') });
    }
  });
  const timer = setTimeout(() => settle({ pending: true }), ms);
  events.start();
  try {
    return await outcome;
  } finally {
    clearTimeout(timer);
    await events.stop();
  }
}
