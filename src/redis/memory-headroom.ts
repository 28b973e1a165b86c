import type { Redis } from 'ioredis';

/** How long one reading of INFO memory stands: new calls ask it, and must not each ask Redis. */
const READING_MS = 500;

const NO_REFUSAL = Object.freeze({ refusal: undefined });

/**
 * Whether Redis still has room for new calls (REDIS_MEMORY_HEADROOM_PERCENT). With `maxmemory`
 * and `noeviction`, a full Redis refuses every write: in issue 27 another workspace's INSERT
 * answered INTERNAL and the worker dropped every shard lease (`OOM command not allowed`). New
 * calls are refused while `used_memory` is within the headroom of `maxmemory`, so what is under
 * way (completions, decisions, lease renewals, each small) still finds the room it needs.
 */
export class RedisMemoryHeadroom {
  private reading?: { at: number; refusal: string | undefined };
  private pending?: Promise<string | undefined>;

  constructor(
    private readonly redis: Redis,
    /** REDIS_MEMORY_HEADROOM_PERCENT; 0: never refuse. */
    private readonly percent: number,
  ) {}

  /** Why no new call may be enqueued now, or undefined when Redis has room (or no maxmemory). */
  async refusal(now = Date.now()): Promise<string | undefined> {
    const known = this.known(now);
    if (known) return known.refusal;
    this.pending ??= this.read().finally(() => (this.pending = undefined));
    return this.pending;
  }

  /**
   * {@link refusal} when it needs no reading of Redis (none kept, or the last one fresh): a
   * caller's warm path checks it without an await. Undefined: ask {@link refusal}.
   */
  known(now = Date.now()): { refusal: string | undefined } | undefined {
    if (this.percent <= 0) return NO_REFUSAL;
    if (this.reading && now - this.reading.at < READING_MS) return this.reading;
    return undefined;
  }

  private async read(): Promise<string | undefined> {
    let info: string;
    try {
      info = await this.redis.info('memory');
    } catch {
      // INFO refused (some managed Redis rename it) or Redis gone: the headroom cannot be read,
      // and a call is not refused for that; the outage checks answer a Redis that is gone.
      this.reading = { at: Date.now(), refusal: undefined };
      return undefined;
    }
    const used = infoField(info, 'used_memory');
    const max = infoField(info, 'maxmemory');
    const limit = Math.floor(max * (1 - this.percent / 100));
    const refusal =
      max > 0 && used >= limit
        ? `Redis holds ${used} bytes of its maxmemory ${max}, past the ${this.percent}% kept free for calls under way and shard leases (REDIS_MEMORY_HEADROOM_PERCENT): new calls wait until it is back under ${limit}; an operator can raise maxmemory or lower RESULT_TTL_HOURS`
        : undefined;
    this.reading = { at: Date.now(), refusal };
    return refusal;
  }
}

/** A number field of an INFO reply (`name:value` lines); 0 when absent. */
export function infoField(info: string, name: string): number {
  const m = new RegExp(`^${name}:(\\d+)\\s*$`, 'm').exec(info);
  return m ? Number(m[1]) : 0;
}
