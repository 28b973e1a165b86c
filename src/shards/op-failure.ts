import { stalledTwice } from '../calls/call-answers.ts';
import { AgentDbError, isErrorCode } from '../errors.ts';

/** An op as its caller's answers name it. */
const opName = (op: string, shard: number, db: string | undefined) => `Shard op ${op} (shard ${shard}${db ? `, ${db}` : ''})`;

/** Where to look whether an op that may have run did: a restore leaves an undo point. */
const lookAt = (op: string) => (op.includes('restore') ? " (agentdb history shows a restore's undo point)" : '');

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
  const what = opName(op, shard, db);
  if (stalledTwice(reason))
    return new AgentDbError(
      'UNAVAILABLE',
      `${what}: its workers stopped answering while it ran (${reason}): it may have run part or all of the way, and will not run again by itself. Look before sending it again${lookAt(op)}.`,
    );
  const coded = reason === undefined ? undefined : /^([A-Z_]+): ([\s\S]*)$/.exec(reason);
  if (coded && isErrorCode(coded[1])) return new AgentDbError(coded[1], coded[2]);
  return new AgentDbError('INTERNAL', `${what} failed after its retries: ${reason ?? 'no reason given'}`);
}

/** The UNAVAILABLE answer of an op whose job Redis lost while it waited. */
export function gone(op: string, shard: number, db: string | undefined): string {
  return `${opName(op, shard, db)}: its job is gone from Redis (Redis came back without its data); it may have run part or all of the way, and will not run now. Look before sending it again${lookAt(op)}.`;
}

/** What an op cut off by a Redis outage leaves behind, for its UNAVAILABLE answer. */
export function whetherItRuns(op: string, shard: number, db: string | undefined, toRedis: boolean): string {
  const what = opName(op, shard, db);
  return toRedis
    ? // A worker may have taken it and finished before Redis went: its answer was lost with it, and
      // a restore in place had so run (taking back the writes after its moment) while its caller
      // read "if Redis comes back with its data" and Redis came back empty (session 33, F10).
      `${what} had been handed to Redis: it may still run, if Redis comes back with its data (AOF) and a worker takes it, and a worker may have run it already, whatever Redis comes back with; look before sending it again${lookAt(op)}.`
    : `${what} never reached Redis: it will not run.`;
}
