import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

// Extend or take the lease only while it is ours (or free): a compare-and-set, so a worker
// that lost its lease to a takeover can never renew over the new owner.
const ACQUIRE = `
local cur = redis.call('GET', KEYS[1])
if cur == false or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`;

const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/**
 * The lease by which exactly one worker process owns a shard (and so opens its files). It
 * lives `ttlMs` in Redis unless renewed; a dead owner's shards are taken over once it lapses.
 */
export class ShardLease {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    /** Unique per worker process. */
    readonly token: string,
    private readonly ttlMs: number,
  ) {}

  /** Takes the shard if free, or extends it if already ours. True when we own it now. */
  async acquire(shard: number): Promise<boolean> {
    const won = await this.redis.eval(ACQUIRE, 1, this.keys.lease(shard), this.token, String(this.ttlMs));
    return won === 1;
  }

  /** Gives the shard up at once so another worker need not wait for the lease to lapse. */
  async release(shard: number): Promise<void> {
    await this.redis.eval(RELEASE, 1, this.keys.lease(shard), this.token);
  }

  /** The token of the worker that owns the shard, if any. */
  async owner(shard: number): Promise<string | null> {
    return this.redis.get(this.keys.lease(shard));
  }
}
