import type { Redis } from 'ioredis';
import type { ShardOpOutcome } from '../contracts/shard-op.ts';
import { AgentDbError } from '../errors.ts';

/**
 * The largest shard-op result that travels inline, in BullMQ's job and in its shard queue's
 * event stream (as an events-stream envelope past 16 KiB travels by reference). Both keep what
 * they carry long after anyone reads it: the job 5 minutes, the stream its last ~1,000 events.
 * In the hostile review one member's 30 CSV exports on the web page (2 MiB chunks, unmetered)
 * left 587 MB in one shard's event stream, counted in no workspace's budget.
 */
export const OP_INLINE_BYTES = 16 * 1024;

/** How long a spilled result waits for its caller, who reads it at once; only a caller gone leaves it. */
export const OP_RESULT_TTL_MS = 60_000;

/** What a shard op's job answers: its outcome, or a reference to a large result. */
export type WireOutcome = ShardOpOutcome | { ok: true; spilled: string };

/**
 * The outcome the owner answers: as it is when small, else a reference to the result, set under
 * `key` for {@link OP_RESULT_TTL_MS}.
 */
export async function spillLarge(redis: Redis, key: string, outcome: ShardOpOutcome): Promise<WireOutcome> {
  if (!outcome.ok) return outcome;
  const json = JSON.stringify(outcome.result);
  if (json === undefined || Buffer.byteLength(json) <= OP_INLINE_BYTES) return outcome;
  await redis.set(key, json, 'PX', OP_RESULT_TTL_MS);
  return { ok: true, spilled: key };
}

/** The caller's side: a spilled result read and deleted, any other outcome as it came. */
export async function unspill(redis: Redis, outcome: WireOutcome): Promise<ShardOpOutcome> {
  if (!outcome.ok || !('spilled' in outcome)) return outcome;
  const json = await redis.getdel(outcome.spilled);
  if (json === null) throw new AgentDbError('UNAVAILABLE', `the shard op's result was gone from Redis before it was read (${outcome.spilled})`);
  return { ok: true, result: JSON.parse(json) as unknown };
}
