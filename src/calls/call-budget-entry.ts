import type { ErrorEnvelope } from '../contracts/envelope.ts';
import { CALL_OVERHEAD_BYTES, ENVELOPE_RESERVE_BYTES } from './redis-bytes.ts';

/** One thing a workspace keeps in Redis, and until when (ms). */
export interface BudgetEntry {
  /** The call's key (`callKey`), so that a call counted twice counts once. */
  callKey: string;
  /**
   * `call` (a call's job from its enqueue to its completion: its data, and room for its envelope
   * until it has one), `done` (the finished job: its data and its result), `approval` (its
   * record), `task` (an MCP task standing for it, with its result), `claim` (a caller's own call
   * id's claim, which outlives the job: `claimEntry`), `restore` (a restore submission's records:
   * `src/shards/restore-once.ts`).
   */
  kind: 'call' | 'done' | 'approval' | 'task' | 'claim' | 'restore';
  bytes: number;
  until: number;
}

/**
 * A call's entry in its workspace's Redis budget from its enqueue to its completion: its data
 * (`dataBytes`, as `jsonBytes` counts it), what a job costs beside, and the room its envelope will
 * take. The ledger's member is `<callKey>|call:<bytes>`, so the client that adds it and the worker
 * that swaps it for the call's `done` entry must come to the same bytes: both take them from here.
 * One entry, not the arguments and the room as two: each side of a call paid Redis a ZADD or ZREM
 * more and sent one more member (issue 31); the sum is the same.
 */
export function callEntry(callKey: string, dataBytes: number, until: number): BudgetEntry {
  return { callKey, kind: 'call', bytes: callEntryBytes(dataBytes), until };
}

/** The bytes of {@link callEntry} for data of `dataBytes`: what a resend compares with its first call's. */
export function callEntryBytes(dataBytes: number): number {
  return dataBytes + CALL_OVERHEAD_BYTES + ENVELOPE_RESERVE_BYTES;
}

/**
 * Whether a call that stores nothing of its own under its key (a resend of a finished call, one
 * refused IDEMPOTENCY_CONFLICT) may let go of the entry its admission added, which nothing else
 * would let go of (only a worker completing a call does; fault review F4: held for days). Calls
 * under one key whose data come to the same bytes share one member, counted once: while the id's
 * first call may still stand for it (not known to have finished), letting it go would leave that
 * call counted for nothing, and a tenant racing two calls under one id could hold calls past its
 * budget (review R1). Bytes not known (the first call's job not found, a claim written before
 * claims kept them) keep the entry: counted too long is the safe side, too little is not.
 */
export function entryIsOwn(mine: number, first: { bytes?: number; finished: boolean }): boolean {
  return first.finished || (first.bytes !== undefined && first.bytes !== mine);
}

/**
 * The Redis budget's QUOTA_EXCEEDED with `error.retryAfter`, the seconds until its oldest kept
 * call expires: the one answer of that code worth sending again, and when (the disk quota's,
 * from a worker, carries none: its room comes back in days, as history ages out; review L2).
 */
export function budgetRefusal(env: ErrorEnvelope, retryAfterS: number | undefined): ErrorEnvelope {
  if (retryAfterS === undefined) return env;
  return { ...env, error: { ...env.error, retryAfter: retryAfterS } };
}
