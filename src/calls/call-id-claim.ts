import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';

/**
 * What a caller's own call id was first used for, kept in Redis under its call key
 * (`keys.callIdClaim`): the shard and database its call reached and the call's fingerprint
 * (`callFingerprint`). The client sets it before it enqueues anything (see
 * `AgentDbClient.claimCallId`), so the same id with another tool, arguments or scope is refused
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

/** A claim as Redis holds it, or undefined when absent or not one. */
export function parseClaim(text: string | null): CallIdClaim | undefined {
  if (text === null) return undefined;
  try {
    const c = JSON.parse(text) as Partial<CallIdClaim>;
    if (typeof c.shard !== 'number' || typeof c.database !== 'string' || typeof c.fingerprint !== 'string') return undefined;
    return { shard: c.shard, database: c.database, fingerprint: c.fingerprint, ...(c.recorded === true ? { recorded: true as const } : {}) };
  } catch {
    return undefined;
  }
}

// KEYS: the claim; ARGV: the fingerprint of the call giving the id up, the new claim, its TTL (s).
// Only a claim that is that call's (or none: Redis lost it again) is replaced: a claim another
// call took meanwhile is its own.
const YIELD = `
local held = redis.call('GET', KEYS[1])
if held then
  local ok, claim = pcall(cjson.decode, held)
  if not ok or type(claim) ~= 'table' or claim.fingerprint ~= ARGV[1] then return 0 end
end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1`;

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
  const claim: CallIdClaim = { shard: recorded.shard, database: recorded.database, fingerprint: '', recorded: true };
  return (await redis.eval(YIELD, 1, keys.callIdClaim(callKey), from, JSON.stringify(claim), ttlS)) === 1;
}
