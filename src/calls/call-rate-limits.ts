import type { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { RateLimitSettings } from '../config.ts';
import type { Plan } from '../contracts/settings.ts';
import { planCallRates } from '../policy/plan-limits.ts';
import type { Keys } from '../redis/keys.ts';

/** Who a call is counted against: its workspace, and its key (or a keyless runtime's agent). */
export interface RateSubject {
  plan: Plan;
  workspace: string;
  /** The key id the call was made with, if any. */
  keyId?: string;
  /** The caller the call is keyed under: an agent's slug, or `@<member>`. */
  agent: string;
}

/**
 * What a lookup of a call (`GET /v1/calls/:id`, `agentdb result`, `client.result`) costs against
 * the rate limits, in tenths of a call: a tenth. A lookup costs Redis 1 to 3 round trips where a
 * call costs about 20, but uncounted, one workspace polling in a loop took 17 commands a lookup
 * and another workspace's p99 went from 113 to 500 ms (issue 27).
 */
export const LOOKUP_POINTS = 1;

/** What a call costs against the rate limits: a budget of N calls is 10·N points. */
export const CALL_POINTS = 10;

/** A refusal: which budget was spent, what it is, and the seconds until its window ends. */
export interface RateRefusal {
  of: 'workspace' | 'key';
  /** The budget, in calls (a lookup counts {@link LOOKUP_POINTS}/{@link CALL_POINTS} of one). */
  calls: number;
  windowS: number;
  retryAfterS: number;
}

/** The plans' rates at the default window: `RATE_LIMITS=plan`, `RATE_LIMIT_WINDOW_S=60`. */
export const DEFAULT_RATE_LIMITS: RateLimitSettings = Object.freeze({ windowS: 60 });

/**
 * The call-rate rule: each workspace and each key may start so many calls per window, by plan
 * (src/policy/plan-limits.ts). Counted in Redis by rate-limiter-flexible, one counter per
 * workspace and one per key under the deployment's prefix, so every process that accepts calls
 * shares them and no tenant's count is another's.
 */
export class CallRateLimits {
  /** One limiter per plan and subject kind: the plans' budgets differ, their counters do not. */
  private readonly limiters = new Map<string, RateLimiterRedis>();

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly settings: RateLimitSettings,
  ) {}

  /**
   * Counts one call of `s`; undefined when it may go ahead, else the seconds until it may be
   * sent again. The key's budget is asked first and alone: a key refused for its own budget
   * spends nothing of its workspace's, so one runaway key leaves its workspace's other callers
   * their share.
   */
  async admit(s: RateSubject): Promise<RateRefusal | undefined> {
    return this.count(s, CALL_POINTS);
  }

  /**
   * Counts one lookup of a call by `s` against the same budgets as its calls, at a tenth of a
   * call ({@link LOOKUP_POINTS}): a caller that polls gets ten lookups for each call it leaves
   * unmade, and one that polls in a loop is refused like one that calls in a loop.
   */
  async admitLookup(s: RateSubject): Promise<RateRefusal | undefined> {
    return this.count(s, LOOKUP_POINTS);
  }

  private async count(s: RateSubject, points: number): Promise<RateRefusal | undefined> {
    const subject = s.keyId !== undefined ? `k:${s.workspace}:${s.keyId}` : `a:${s.workspace}:${s.agent}`;
    return (await this.consume(s.plan, 'key', subject, points)) ?? (await this.consume(s.plan, 'workspace', s.workspace, points));
  }

  private async consume(plan: Plan, of: 'workspace' | 'key', subject: string, points: number): Promise<RateRefusal | undefined> {
    const limiter = this.limiter(plan, of);
    try {
      await limiter.consume(subject, points);
      return undefined;
    } catch (err) {
      // A refusal is a RateLimiterRes; anything else is Redis failing, for the caller's outage answer.
      if (!(err instanceof RateLimiterRes)) throw err;
      return { of, calls: limiter.points / CALL_POINTS, windowS: this.settings.windowS, retryAfterS: Math.max(1, Math.ceil(err.msBeforeNext / 1000)) };
    }
  }

  private limiter(plan: Plan, of: 'workspace' | 'key'): RateLimiterRedis {
    const name = `${plan}:${of}`;
    let limiter = this.limiters.get(name);
    if (!limiter) {
      const { windowS } = this.settings;
      const override = of === 'workspace' ? this.settings.workspaceCalls : this.settings.keyCalls;
      const calls = override ?? Math.max(1, Math.round((planCallRates(plan)[of] * windowS) / 60));
      const points = calls * CALL_POINTS;
      limiter = new RateLimiterRedis({
        storeClient: this.redis,
        keyPrefix: this.keys.callRate(of),
        points,
        duration: windowS,
        // Once over, refuse from memory until the window ends: a caller that keeps hammering
        // costs Redis nothing more (the counter, and its TTL, are the same in every process).
        inMemoryBlockOnConsumed: points + 1,
      });
      this.limiters.set(name, limiter);
    }
    return limiter;
  }
}
