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

/** A refusal: which budget was spent, what it is, and the seconds until its window ends. */
export interface RateRefusal {
  of: 'workspace' | 'key';
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
    const subject = s.keyId !== undefined ? `k:${s.workspace}:${s.keyId}` : `a:${s.workspace}:${s.agent}`;
    return (await this.consume(s.plan, 'key', subject)) ?? (await this.consume(s.plan, 'workspace', s.workspace));
  }

  private async consume(plan: Plan, of: 'workspace' | 'key', subject: string): Promise<RateRefusal | undefined> {
    const limiter = this.limiter(plan, of);
    try {
      await limiter.consume(subject);
      return undefined;
    } catch (err) {
      // A refusal is a RateLimiterRes; anything else is Redis failing, for the caller's outage answer.
      if (!(err instanceof RateLimiterRes)) throw err;
      return { of, calls: limiter.points, windowS: this.settings.windowS, retryAfterS: Math.max(1, Math.ceil(err.msBeforeNext / 1000)) };
    }
  }

  private limiter(plan: Plan, of: 'workspace' | 'key'): RateLimiterRedis {
    const name = `${plan}:${of}`;
    let limiter = this.limiters.get(name);
    if (!limiter) {
      const { windowS } = this.settings;
      const override = of === 'workspace' ? this.settings.workspaceCalls : this.settings.keyCalls;
      const points = override ?? Math.max(1, Math.round((planCallRates(plan)[of] * windowS) / 60));
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
