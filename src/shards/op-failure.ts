import { stalledTwice } from '../calls/call-answers.ts';
import { AgentDbError, isErrorCode } from '../errors.ts';

/**
 * What the caller of a shard op that failed after its retries is answered: an error with a code,
 * not BullMQ's bare reason. Thrown as a plain `Error`, `agentdb restore` on a full disk at load 30
 * exited 1 with a stack trace ("job stalled more than allowable limit", session 38, D6), where an
 * operator needs a code, an exit status by it and whether the op took effect.
 *
 * - BullMQ's stalled check failed it (its workers lost it twice while it ran): UNAVAILABLE, and it
 *   may have run part or all of the way, as a write's call is answered (`failedCallEnvelope`).
 * - The op threw an agentdb error after its retries (`CODE: detail`): that code, that detail.
 * - Anything else is a fault of agentdb's own: INTERNAL, with the reason.
 */
export function opFailure(op: string, shard: number, db: string | undefined, reason: string | undefined): AgentDbError {
  const what = `Shard op ${op} (shard ${shard}${db ? `, ${db}` : ''})`;
  const look = op.includes('restore') ? " (agentdb history shows a restore's undo point)" : '';
  if (stalledTwice(reason))
    return new AgentDbError(
      'UNAVAILABLE',
      `${what}: its workers stopped answering while it ran (${reason}): it may have run part or all of the way, and will not run again by itself. Look before sending it again${look}.`,
    );
  const coded = reason === undefined ? undefined : /^([A-Z_]+): ([\s\S]*)$/.exec(reason);
  if (coded && isErrorCode(coded[1])) return new AgentDbError(coded[1], coded[2]);
  return new AgentDbError('INTERNAL', `${what} failed after its retries: ${reason ?? 'no reason given'}`);
}
