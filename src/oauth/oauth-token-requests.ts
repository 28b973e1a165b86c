import type { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { TooManyRequestsError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { Keys } from '../redis/keys.ts';
import { rateSource, rateSource48, SITE_TIMES_ADDRESS } from './oauth-rate-source.ts';

/** OAUTH_TOKEN_REQUESTS_PER_MINUTE's default. */
export const TOKEN_REQUESTS_PER_MINUTE = 60;

/** 429 `too_many_requests` that knows when to ask again (the answer's Retry-After). */
export class RetryLaterError extends TooManyRequestsError {
  constructor(
    message: string,
    /** Seconds until a request would be taken again. */
    readonly retryAfterS: number,
  ) {
    super(message);
  }
}

/**
 * Counts requests to the token and revocation endpoints by address (an IPv4 address, an IPv6
 * address's /64: {@link rateSource}). Both are open to anyone who names a client id, and each
 * request costs Redis reads and a sha256 or two (a secret, a code, a token): unbounded, one
 * address could keep the service busy guessing. Not counted per client id: a client id metadata
 * document's id is every user's of that app, and anyone may name it, so a limit per id was
 * anyone's way to lock all of them out. A person's client asks once an access token's life
 * (an hour by default), so the default leaves room for a whole office behind one address.
 */
export class OAuthTokenRequests {
  private readonly limiter: RateLimiterRedis;
  /**
   * An IPv6 /48's, {@link SITE_TIMES_ADDRESS} times an address's: counted by /64 alone, one site
   * (65,536 /64s) was as good as unbounded (hostile review T18, session 37), as registrations were.
   */
  private readonly limiter48: RateLimiterRedis;

  /** @param perMinute OAUTH_TOKEN_REQUESTS_PER_MINUTE. */
  constructor(
    redis: Redis,
    keys: Keys,
    private readonly perMinute = TOKEN_REQUESTS_PER_MINUTE,
  ) {
    this.limiter = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: keys.oauth('rate', 'token'),
      points: perMinute,
      duration: 60,
      // Past the limit, refused from memory: a flood costs Redis nothing more.
      inMemoryBlockOnConsumed: perMinute + 1,
    });
    this.limiter48 = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: keys.oauth('rate', 'token48'),
      points: perMinute * SITE_TIMES_ADDRESS,
      duration: 60,
      inMemoryBlockOnConsumed: perMinute * SITE_TIMES_ADDRESS + 1,
    });
  }

  /**
   * Counts one request from `source` (the client's address).
   * @throws RetryLaterError past the address's (or its IPv6 /48's) requests this minute.
   */
  async spend(source: string): Promise<void> {
    await spendOne(this.limiter, rateSource(source), `At most ${this.perMinute} token and revocation requests a minute from one address`);
    const of48 = rateSource48(source);
    if (of48) await spendOne(this.limiter48, of48, `At most ${this.perMinute * SITE_TIMES_ADDRESS} token and revocation requests a minute from one IPv6 /48`);
  }
}

/** Counts one against `limiter` for `key`, or throws 429's error naming `what` and when to try again. */
export async function spendOne(limiter: RateLimiterRedis, key: string, what: string): Promise<void> {
  try {
    await limiter.consume(key);
  } catch (err) {
    if (!(err instanceof RateLimiterRes)) throw err;
    const waitS = Math.max(1, Math.ceil(err.msBeforeNext / 1000));
    throw new RetryLaterError(`${what}: try again in ${waitS} s.`, waitS);
  }
}
