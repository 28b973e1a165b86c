import { Job, type Queue } from 'bullmq';
import { errorEnvelope, type Envelope } from '../contracts/envelope.ts';
import { within } from './call-answers.ts';
import type { CallLookup } from './call-lookup.ts';
import type { CallWaiters } from './call-waiters.ts';
import { REDIS_ANSWER_MS, unavailable } from './outage-answers.ts';
import { TIMED_OUT, within as bounded } from '../redis/bounded-wait.ts';

/** One wait for a call's end: the call, its queue, the completion it listens for. */
export interface CompletionWait {
  key: string;
  callId: string;
  tool: string;
  queue: Queue;
  completion: Promise<Envelope>;
  timeoutMs: number;
  /** Remove a call no worker has picked up by `timeoutMs`, answering NO_WORKER (a call's own wait, not a result's). */
  withdraw: boolean;
}

/**
 * Waits for the completion event. The call's job is looked at every `timeoutMs` as a safety net,
 * once for every wait on the call (see {@link CallWaiters.lookEvery}), and no longer once the
 * last wait is gone. With `withdraw`, a call no worker has picked up by then is removed (so it
 * can never run later) and answers NO_WORKER. A running or parked call is waited for, however
 * long it takes — or until the wait's signal (given to `completion`) aborts.
 */
export async function awaitCompletion(waiters: CallWaiters, lookup: CallLookup, w: CompletionWait): Promise<Envelope> {
  watchJob(waiters, lookup, w, w.timeoutMs);
  return w.withdraw ? untilPickedUp(waiters, lookup, w) : w.completion;
}

/**
 * Looks at the call's job every `everyMs` while anyone waits for its end, once for all of them,
 * and at once when the client's connection is back after a drop (`CallWaiters.lookNow`): the
 * envelope found (finished, or lost) completes every wait on the call.
 */
export function watchJob(waiters: CallWaiters, lookup: CallLookup, w: Pick<CompletionWait, 'key' | 'callId' | 'tool' | 'queue'>, everyMs: number): void {
  const { key, queue } = w;
  waiters.lookEvery(key, everyMs, async () => {
    const state = await queue.getJobState(key);
    // Gone while waited for (taken by a worker, then Redis came back empty within the outage
    // window): no completion will ever come, and every look found 'unknown' for ever.
    if (state === 'unknown') return jobLost(w.callId, w.tool);
    return state === 'completed' || state === 'failed' ? lookup.finished(key) : undefined;
  });
}

/**
 * The call's own first wait: withdraws it when no worker has taken it by `timeoutMs`; once one
 * has, it only waits for the completion (or the shared look) like every other wait. A look that
 * Redis does not answer within {@link REDIS_ANSWER_MS} (connected but answering nothing: a
 * SIGSTOP, a frozen VM) answers UNAVAILABLE, the call perhaps still to run, instead of waiting
 * for Redis to wake (review R2: still unanswered 20 s into a 20 s SIGSTOP, with timeoutMs 5 s).
 */
async function untilPickedUp(waiters: CallWaiters, lookup: CallLookup, w: CompletionWait): Promise<Envelope> {
  const { callId, tool, completion, timeoutMs } = w;
  for (;;) {
    const first = await within(completion, timeoutMs);
    if (first !== undefined) return first;
    const looked = await bounded(REDIS_ANSWER_MS, lookAtJob(waiters, lookup, w));
    if (looked === TIMED_OUT) {
      waiters.drop(completion);
      return unavailable(
        callId,
        tool,
        `Redis did not answer within ${REDIS_ANSWER_MS / 1000} s when call ${callId} was looked at after its ${timeoutMs} ms: it is connected but answers nothing. The call may still run: send it again under the same call id for its outcome.`,
        true,
      );
    }
    if (looked === 'wait') return completion;
    if (looked !== 'again') return looked;
  }
}

/**
 * One look at a call's job once `timeoutMs` has passed: its envelope (finished, lost, or
 * withdrawn: NO_WORKER), `wait` for its completion (a worker took it), or `again`.
 */
async function lookAtJob(
  waiters: CallWaiters,
  lookup: CallLookup,
  { key, callId, tool, queue, timeoutMs, completion }: CompletionWait,
): Promise<Envelope | 'wait' | 'again'> {
  // A send may put the job back to run while this looks: what it reads then answers only this wait.
  const stamp = waiters.looking(key);
  const state = await queue.getJobState(key);
  if (state === 'completed' || state === 'failed') {
    const env = await lookup.finished(key);
    if (env) {
      answerAll(waiters, key, env, stamp, completion);
      return env;
    }
  }
  if (state === 'unknown') {
    // The job was enqueued and is gone without a completion: Redis lost it (it came back
    // empty). A worker may have run it first — a write committed there — or be running it
    // still, so "did not run" (NO_WORKER) would answer a committed write as failed, and a
    // caller that believed it and sent it under a new id would write it twice (issue 25).
    const env = jobLost(callId, tool);
    answerAll(waiters, key, env, stamp, completion);
    return env;
  }
  if (state !== 'waiting' && state !== 'prioritized') return 'wait';
  // A worker that has started the call and put it back (its agent was over its share of
  // the shard) did take it: waiting again for a moment is no sign of a missing worker.
  if (((await Job.fromId(queue, key))?.attemptsStarted ?? 0) > 0) return 'wait';
  const removed = await queue.remove(key);
  if (removed === 1) {
    // Name the prefix: a CLI or client under another AGENTDB_PREFIX than the server's is the
    // usual cause, and the caller cannot see which one it used.
    const env = errorEnvelope(
      callId,
      tool,
      'NO_WORKER',
      `No worker took call ${callId} within ${timeoutMs} ms on AGENTDB_PREFIX "${queue.opts.prefix}": is a worker running under that prefix and REDIS_URL?`,
    );
    answerAll(waiters, key, env, stamp, completion);
    return env;
  }
  return 'again';
}

/** The answer for a call whose job is gone from Redis while it was waited for: it may have run. */
export function jobLost(callId: string, tool: string): Envelope {
  return unavailable(
    callId,
    tool,
    `Call ${callId}'s job is gone from Redis (it lost its data): the call may have run. Send it again under the same call id for its outcome.`,
    true,
  );
}

/** Hands what a look found to every wait on the call, unless the job was put back since (`CallWaiters.complete`); the look's own wait ends with its answer either way. */
export function answerAll(waiters: CallWaiters, key: string, env: Envelope, stamp: number | undefined, own: Promise<Envelope>): void {
  waiters.complete(key, env, stamp);
  waiters.drop(own);
}
