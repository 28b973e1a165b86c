import type { Redis } from 'ioredis';
import type { OffloadQuota, QuotaAnswer } from './offloaded-results.ts';
import type { Keys } from '../redis/keys.ts';

// Drops the expired, sums the rest, and adds the new result only when the sum stays within the
// cap: one script, so concurrent calls of a workspace cannot each see room for themselves.
const RESERVE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local held = 0
local members = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local first = nil
for i = 1, #members, 2 do
  held = held + tonumber(string.match(members[i], ':(%d+)$'))
  if first == nil then first = members[i + 1] end
end
if held + tonumber(ARGV[3]) > tonumber(ARGV[5]) then return {0, tostring(held), first or ''} end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2] .. ':' .. ARGV[3])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return {1, tostring(held + tonumber(ARGV[3])), ''}
`;

/**
 * Bounds what a workspace's offloaded results hold in the blob store at once
 * (MAX_OFFLOADED_BYTES_PER_WORKSPACE): a ledger in Redis of each result kept and when it
 * expires. The hostile review filled a blob store at 64 MiB a call with one query repeated; the
 * store itself cannot say what a workspace holds without listing it.
 */
export class RedisOffloadQuota implements OffloadQuota {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly cap: number,
  ) {}

  async reserve(workspace: string, id: string, bytes: number, expiresAt: number, now: number): Promise<QuotaAnswer> {
    const [ok, held, first] = (await this.redis.eval(RESERVE, 1, this.keys.offloaded(workspace), String(now), id, String(bytes), String(expiresAt), String(this.cap))) as [number, string, string];
    return ok === 1 ? { ok: true } : { ok: false, held: Number(held), cap: this.cap, ...(first ? { freesAt: Number(first) } : {}) };
  }

  async release(workspace: string, id: string, bytes: number): Promise<void> {
    await this.redis.zrem(this.keys.offloaded(workspace), `${id}:${bytes}`);
  }
}
