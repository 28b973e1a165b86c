import { Job, type JobsOptions, type Queue } from 'bullmq';
import type { CallJobData } from '../contracts/call.ts';
import { payloadDifferences } from '../contracts/call-identity.ts';
import { errorEnvelope, type Envelope } from '../contracts/envelope.ts';
import { isRetryable } from '../errors.ts';
import { finishedEnvelope, type CallAnswer } from './call-answers.ts';
import type { CallLookup } from './call-lookup.ts';
import type { CallWaiters } from './call-waiters.ts';
import { callEntryBytes, entryIsOwn } from './call-budget-entry.ts';
import { jsonBytes } from './redis-bytes.ts';

/** A call being added to its shard queue, with the waits already listening for it. */
export interface CallToAdd {
  queue: Queue;
  key: string;
  data: CallJobData;
  /** How long the finished job keeps its result, in seconds. */
  resultTtlS: number;
  /** The caller named the call id: it may have been used before. A generated id is new by nature. */
  ownId: boolean;
  wait: boolean;
  /** The send's wait for the call's end: replaced by a new one when the send puts the job back to run. */
  completion: Promise<Envelope>;
  /** The send's signal, for the wait that replaces {@link completion}. */
  signal?: AbortSignal;
  /**
   * The send was answered already (UNAVAILABLE "may still run", Redis away), its work going on
   * now that Redis is back: it puts nothing back to run (see {@link addOrJoin}).
   */
  answered?: () => boolean;
  parking?: Promise<Record<string, unknown>>;
  /** The bytes of this call's budget entry (`callEntry`). */
  entryBytes: number;
  /**
   * Lets go of this call's budget entry, when it stores nothing of its own and the entry is its
   * alone (`entryIsOwn`): nothing else would (only a worker completing a call does), and it held
   * its room for days (fault review F4: 4,507 resends filled a pro workspace's budget).
   */
  letGo(): Promise<void>;
  /**
   * Places the job this call added in its workspace's turn (`placeAdded`), once the add is known
   * to have made it (not a job of the id found there): the admitted add's script does it in the
   * same step, this path in the command after.
   */
  place?(): Promise<unknown>;
}

/**
 * Adds a call's job and, when its call id was used before, answers what the id already answers:
 * IDEMPOTENCY_CONFLICT for another call, the first call's envelope for the same call finished,
 * and without `wait` where a parked one stands. Undefined: the call (this one, or the first one
 * it joins) is queued or running, to be waited for like a first call.
 */
export async function addOrJoin(waiters: CallWaiters, lookup: CallLookup, c: CallToAdd): Promise<CallAnswer | undefined> {
  const { queue, key, data, completion, parking } = c;
  const { callId, tool } = data;
  // A caller's own call id may have been used before: read what the id holds alongside the
  // add (same connection, so no extra round trip's wait).
  let [, earlier] = await Promise.all([
    queue.add('call', data, callJobOptions(key, c.resultTtlS)),
    c.ownId ? Job.fromId<CallJobData, Envelope>(queue, key) : undefined,
  ]);
  if (
    earlier &&
    earlier.data.enqueuedAt !== data.enqueuedAt &&
    earlier.finishedOn &&
    ranNothingUnderItsId(earlier) &&
    payloadDifferences(earlier.data, data).length
  ) {
    // The job under this id is another call's, refused because the id was not its to use (it
    // found the database's record holding it): it ran nothing and holds the id for nobody.
    // This call has the claim (checked before): it takes the job's place.
    await queue.remove(key);
    [, earlier] = await Promise.all([queue.add('call', data, callJobOptions(key, c.resultTtlS)), Job.fromId<CallJobData, Envelope>(queue, key)]);
  }
  if (!earlier || earlier.data.enqueuedAt === data.enqueuedAt) {
    await c.place?.();
    return undefined;
  }
  const differs = payloadDifferences(earlier.data, data);
  if (differs.length) {
    waiters.drop(completion, parking);
    const first = { bytes: callEntryBytes(jsonBytes(earlier.data)), finished: !!earlier.finishedOn && !runsAgainWhenSent(earlier) };
    if (entryIsOwn(c.entryBytes, first)) await c.letGo();
    return errorEnvelope(
      callId,
      tool,
      'IDEMPOTENCY_CONFLICT',
      `Call id ${JSON.stringify(callId)} was already used for another call (it differs in ${differs.join(', ')}).`,
    );
  }
  // The same call again: it answers the first one's outcome, finished or not — unless its
  // job failed. That is a fault's end (a worker that could not start a database process,
  // after its retries), not the call's outcome, and must not stay the id's answer: the call
  // runs again (a write that did commit is replayed by its record, not run twice).
  // So is an answer whose code says "try again" (STORAGE_FULL, RETRY_LATER …): a caller
  // retries under the same id, as it should, and must reach the fault's end, not its echo.
  if (earlier.finishedOn && (isFailed(earlier) || endedRetryable(earlier))) {
    // A send already answered "may still run" whose commands Redis ran once back puts nothing
    // back: a later send of the id may have been answered that run's refusal since, and a run
    // put back now would commit under that "nothing was written" (session 34, F12).
    if (c.answered?.()) {
      waiters.drop(completion, parking);
      return finishedEnvelope(earlier);
    }
    // This send's wait, set before it looked, may already be settled by the run that ended
    // (its announcement, a look, a lookup between the listening and the add): that refusal is
    // not the outcome of the run put back. Listen anew first, the old run's news shut out.
    waiters.drop(completion);
    c.completion = waiters.completion(key, c.signal);
    const putBack = waiters.putBack(key, earlier.finishedOn);
    try {
      await runAgain(earlier, isFailed(earlier) ? 'failed' : 'completed');
    } finally {
      putBack();
    }
  } else if (earlier.finishedOn) {
    const env = await lookup.late(earlier);
    await c.letGo();
    waiters.complete(key, env);
    return env;
  }
  if (!c.wait) {
    // Parked already (or just finished): that is the answer. Queued or running, it waits
    // like the first call, on waits of its own, which were listening before it looked.
    const where = await lookup.standing(key, queue);
    if (where && (!('status' in where) || where.status === 'awaiting_approval')) {
      waiters.drop(c.completion, parking);
      return where;
    }
  }
  return undefined;
}

/**
 * What a resend refused by its workspace's Redis budget answers instead, since it stores nothing
 * more: the same call's outcome when it finished under `key` (not a fault's end or a "try again",
 * which run again), or where it stands while it is under way (queued, running, waiting for a
 * person). Refused, a committed write was answered QUOTA_EXCEEDED, "nothing was stored, created
 * or run" (fault review F4), and so was a call still under way (review R1).
 */
export async function resentOutcome(lookup: CallLookup, queue: Queue, key: string, data: CallJobData): Promise<CallAnswer | undefined> {
  const earlier = await Job.fromId<CallJobData, Envelope>(queue, key);
  if (!earlier || payloadDifferences(earlier.data, data).length) return undefined;
  if (!earlier.finishedOn) return lookup.standing(key, queue, earlier);
  if (isFailed(earlier) || endedRetryable(earlier)) return undefined;
  return lookup.late(earlier);
}

/** The options of a call's job: its id the call key, retries after a fault, kept `resultTtlS` once finished. */
export function callJobOptions(key: string, resultTtlS: number): JobsOptions & { jobId: string } {
  return {
    jobId: key,
    // Retries only ever follow a fault (a dead worker, a lost Redis): agent errors complete.
    attempts: 3,
    backoff: { type: 'exponential', delay: 500 },
    removeOnComplete: { age: resultTtlS },
    removeOnFail: { age: resultTtlS },
  };
}

/**
 * A finished job that the same call sent again puts back to run (see {@link addOrJoin}): it
 * failed, or ended with a "try again". Such a call may be under way again at any moment.
 */
export function runsAgainWhenSent(job: Job<CallJobData, Envelope>): boolean {
  return !!job.finishedOn && (isFailed(job) || endedRetryable(job));
}

/** A job that failed (threw after its retries) rather than completed with an envelope. */
function isFailed(job: Job<CallJobData, Envelope>): boolean {
  return job.returnvalue == null && !!job.failedReason;
}

/**
 * A job that completed with a refusal whose code is retryable, or the disk quota's (nothing is
 * written past it, and its room may have come back since: not worth a loop of resends, but the
 * one sent once room is back runs): nothing ran that a rerun could double.
 */
function endedRetryable(job: Job<CallJobData, Envelope>): boolean {
  const env = job.returnvalue as Envelope | null | undefined;
  return !!env && env.ok === false && 'error' in env && (isRetryable(env.error.code) || env.error.code === 'QUOTA_EXCEEDED');
}

/** Puts a finished job back to run, with its retries anew. */
async function runAgain(job: Job<CallJobData, Envelope>, state: 'failed' | 'completed'): Promise<void> {
  try {
    await job.retry(state, { resetAttemptsMade: true, resetAttemptsStarted: true });
  } catch {
    // No longer failed: another re-send put it back first (or it was removed); the wait that
    // follows finds out which.
  }
}

/**
 * A finished job that answered IDEMPOTENCY_CONFLICT: its call ran nothing (a worker answers that
 * only for a call whose id its database's record, or an approval, holds for another statement).
 */
function ranNothingUnderItsId(job: Job<CallJobData, Envelope>): boolean {
  const env = job.returnvalue as Envelope | null | undefined;
  return !!env && env.ok === false && env.error.code === 'IDEMPOTENCY_CONFLICT';
}
