import { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { CallJobData } from '../contracts/call.ts';
import { callFingerprint, payloadDifferences } from '../contracts/call-identity.ts';
import type { Envelope } from '../contracts/envelope.ts';
import type { Keys } from '../redis/keys.ts';
import { withScripts } from '../redis/lua-scripts.ts';
import type { ShardQueues } from '../redis/shard-queues.ts';
import { entryIsOwn } from './call-budget-entry.ts';
import { runsAgainWhenSent } from './call-resend.ts';
import type { BudgetEntry } from './call-budget-entry.ts';

/**
 * What a caller's own call id was first used for, kept in Redis under its call key
 * (`keys.callIdClaim`): the shard and database its call reached and the call's fingerprint
 * (`callFingerprint`). The client sets it before it enqueues anything (see
 * {@link claimCallId}), so the same id with another tool, arguments or scope is refused
 * whichever shard queue it would reach.
 *
 * `recorded`: the id is held by the call that a database's exactly-once record (`_agentdb_calls`)
 * holds under it, known there and not here — `fingerprint` is then empty. A worker writes such a
 * claim when a call finds that the record already holds its id for another statement: after Redis
 * came back empty, the claim of the call that really ran was gone, and the other call took the
 * id; kept, it made the first call's own re-send answer "nothing ran" for a committed write.
 */
export interface CallIdClaim {
  shard: number;
  database: string;
  fingerprint: string;
  recorded?: true;
  /** The bytes of the first call's budget entry (`callEntry`), so a call refused the id knows whether it shares it. */
  entryBytes?: number;
}

/**
 * The tools whose calls leave an exactly-once record in their database: the only ones a
 * `recorded` claim lets through, since their worker checks the record (it replays the call
 * recorded, and refuses another). A read checks nothing there, so it would run under an id a
 * write had used.
 */
export const RECORDED_TOOLS: ReadonlySet<string> = new Set(['DATA_WRITE_SQL', 'DATA_DROP_TABLE']);

/**
 * How long a call id's claim lives: as long as its job can (a day to be taken, the approval wait,
 * then the kept result), so it does not expire while the job still answers for the id, nor hold
 * Redis bytes for long after (one ~200-byte key per call with its caller's own id).
 */
export function claimTtlS(resultTtlS: number, approvalTtlMs: number): number {
  return resultTtlS + Math.ceil(approvalTtlMs / 1000) + 24 * 3600;
}

/**
 * What one claim holds in Redis, with its entry in the budget's ledger, which lives as long:
 * MEMORY USAGE measured 216 bytes for the claim and 150 a ledger member (2,000 of them), rounded up.
 */
export const CLAIM_BYTES = 384;

/**
 * A caller's own call id's claim as its workspace's Redis budget counts it, from the call's
 * admission until the claim expires ({@link claimTtlS}, a minute later, since the claim is set
 * after the count). The call's own entries go RESULT_TTL_HOURS after it finishes, with the job;
 * the claim stays APPROVAL_TTL_MS and a day longer, and was counted by none (hostile review T6:
 * 216 bytes for 48 h after a small call's 2,112-byte `done` entry went, ~20 % past the budget at
 * the defaults, ~3 times it at APPROVAL_TTL_MS's 30 days). A resend, or another call under the
 * id, names the same member: counted once, and never let go with the call's entry.
 */
export function claimEntry(key: string, ttlS: number, now: number): BudgetEntry {
  return { callKey: key, kind: 'claim', bytes: CLAIM_BYTES, until: now + (ttlS + 60) * 1000 };
}

/** A claim as Redis holds it, or undefined when absent or not one. */
export function parseClaim(text: string | null): CallIdClaim | undefined {
  if (text === null) return undefined;
  try {
    const c = JSON.parse(text) as Partial<CallIdClaim>;
    if (typeof c.shard !== 'number' || typeof c.database !== 'string' || typeof c.fingerprint !== 'string') return undefined;
    return {
      shard: c.shard,
      database: c.database,
      fingerprint: c.fingerprint,
      ...(c.recorded === true ? { recorded: true as const } : {}),
      ...(typeof c.entryBytes === 'number' ? { entryBytes: c.entryBytes } : {}),
    };
  } catch {
    return undefined;
  }
}

/**
 * Gives a call id up to the call its database's exactly-once record holds under it: the call
 * whose fingerprint is `from` found that record (it ran nothing, and answers
 * IDEMPOTENCY_CONFLICT), so the claim becomes a `recorded` one for that database. The recorded
 * call's own re-send then runs, and its record answers it with the recorded result.
 * @returns whether the claim was replaced.
 */
export async function yieldToRecord(
  redis: Redis,
  keys: Keys,
  callKey: string,
  from: string,
  recorded: { shard: number; database: string },
  ttlS: number,
): Promise<boolean> {
  return yieldClaim(redis, keys, callKey, from, { shard: recorded.shard, database: recorded.database, fingerprint: '', recorded: true }, ttlS);
}

/**
 * Gives a call id up to `claim`, the call that holds it elsewhere (the call-id ledger,
 * `CallIdLedger`): the call whose fingerprint is `from` was refused for it and ran nothing. As
 * {@link yieldToRecord}, only a claim that is still that call's (or none) is replaced.
 * @returns whether the claim was replaced.
 */
export async function yieldClaim(redis: Redis, keys: Keys, callKey: string, from: string, claim: CallIdClaim, ttlS: number): Promise<boolean> {
  return (await withScripts(redis).agentdbCallIdYield(keys.callIdClaim(callKey), from, JSON.stringify(claim), String(ttlS))) === 1;
}

/**
 * Why a call may not take its id, and whether the budget entry its admission added is its own
 * alone ({@link entryIsOwn}), to be let go: nothing else would let it go.
 */
export interface ClaimRefusal {
  why: string;
  entryIsOwn: boolean;
}

/** Where a client claims call ids: its Redis and shard queues, and how long a claim lives ({@link claimTtlS}). */
export interface ClaimPlace {
  redis: Redis;
  keys: Keys;
  queues: ShardQueues;
  shardCount: number;
  ttlS: number;
}

/**
 * Takes a caller's own call id for this call, or says why it is another call's: what differs
 * from the call the id was first used for. The id's first call is recorded with its call key
 * (shard, database, {@link callFingerprint}) before anything is enqueued, and set only if
 * absent, so of two different calls sent at once under one id exactly one is taken. A job is
 * deduplicated by BullMQ only within its own shard's queue: without this record the same id
 * with another scope (another database, so another shard) ran as a second call. The same call
 * again finds its own fingerprint and goes on to answer the first call's outcome.
 */
export async function claimCallId(
  { redis, keys, queues, shardCount, ttlS }: ClaimPlace,
  key: string,
  mine: { shard: number; database: string; data: CallJobData; entryBytes: number },
): Promise<ClaimRefusal | undefined> {
  const fingerprint = callFingerprint({ ...mine.data, database: mine.database });
  const claim: CallIdClaim = { shard: mine.shard, database: mine.database, fingerprint, entryBytes: mine.entryBytes };
  const at = keys.callIdClaim(key);
  // SET NX, then GET when it was taken (not SET NX GET, which needs Redis 7): the second round
  // trip is paid only by a call id sent again. A claim gone in between (expired) is taken anew.
  for (let tries = 0; tries < 2; tries++) {
    if ((await redis.set(at, JSON.stringify(claim), 'EX', ttlS, 'NX')) === 'OK') return undefined;
    const held = parseClaim(await redis.get(at));
    if (!held) continue;
    if (held.fingerprint === fingerprint) return undefined;
    // Held for the call a database's record holds (see `CallIdClaim.recorded`): a write or
    // drop into that database goes on, and its worker replays it or refuses it by the record.
    if (held.recorded && held.database === mine.database && RECORDED_TOOLS.has(mine.data.tool)) return undefined;
    const callId = JSON.stringify(mine.data.callId);
    // A recorded claim lets a write into its database through, which may be under way now.
    const earlier = held.shard < shardCount ? await Job.fromId<CallJobData, Envelope>(queues.of(held.shard), key) : undefined;
    // Finished for good: not a job the first call sent again puts back to run (review T6).
    const first = { bytes: held.entryBytes, finished: !!earlier?.finishedOn && !runsAgainWhenSent(earlier) };
    if (held.recorded) {
      return {
        why: `Call id ${callId} already ran a write or drop in database ${held.database} (its exactly-once record there holds it); nothing ran. Send that call again under the id for its outcome.`,
        entryIsOwn: entryIsOwn(mine.entryBytes, first),
      };
    }
    const differs: string[] = [];
    if (held.database !== mine.database) differs.push(`the database (${held.database}, now ${mine.database})`);
    if (earlier) differs.push(...payloadDifferences(earlier.data, mine.data));
    // A first call withdrawn (NO_WORKER) or past its result's expiry keeps its id taken, but
    // has no outcome left to point at.
    const firstAnswer = earlier ? 'the id answers the first call' : 'the first call under it has no outcome kept';
    const why = differs.length
      ? `Call id ${callId} was already used for another call (it differs in ${differs.join(', ')}); nothing ran, and ${firstAnswer}.`
      : `Call id ${callId} was already used for another call; nothing ran, and ${firstAnswer}.`;
    return { why, entryIsOwn: entryIsOwn(mine.entryBytes, first) };
  }
  return undefined;
}
