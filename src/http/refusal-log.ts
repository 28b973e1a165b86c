import { SITE_TIMES_ADDRESS } from '../oauth/oauth-rate-source.ts';

/** Refusal lines (`request refused`) logged per client address in a minute; past them counted, and said at the next line logged. */
export const REFUSAL_LINES_PER_MINUTE = 20;

const WINDOW_MS = 60_000;
/** Addresses remembered at once; past it all are forgotten (each then logs its next lines again). */
const ADDRESSES_MAX = 10_000;

/** An address's (or site's) refusals in its current minute. */
interface Seen {
  from: number;
  lines: number;
  unlogged: number;
}

/** Whether to log a refusal, and how many refusals from its address went unlogged since the last line. */
export interface RefusalLine {
  log: boolean;
  unlogged: number;
}

/**
 * How many refusals one client address gets logged. Every 4xx logged a line at info (~160 B), and
 * none of them is charged: 2,000 requests with a made-up key wrote 326,000 bytes of log in a few
 * seconds from one address, without limit (hostile review T16, session 36), on the disk and log
 * pipeline every tenant shares. Now an address's first {@link REFUSAL_LINES_PER_MINUTE} refusals in
 * a minute are logged; the rest are counted, and the address's next line logged says how many
 * (`unloggedBefore`), so nothing is hidden, only not repeated. Behind a proxy without
 * TRUST_PROXY every client is the proxy's address, and shares its lines.
 */
export class RefusalLog {
  private readonly byAddress = new Map<string, Seen>();

  constructor(
    private readonly perMinute = REFUSAL_LINES_PER_MINUTE,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * One refusal answered to `address` (an IPv6 address's /64: `rateSource`) of IPv6 site `site`
   * (its /48: `rateSource48`; none for IPv4): whether to log it, and what went unlogged before it.
   * A site's /64s share {@link SITE_TIMES_ADDRESS} times an address's lines: counted by /64 alone,
   * one site (65,536 /64s) had every refusal logged by sending each from a new /64 (hostile review T18).
   */
  refused(address: string, site?: string): RefusalLine {
    const now = this.now();
    // The site first, so that a site past its lines adds no entry for each new /64 it sends from.
    const ofSite = site === undefined ? undefined : this.seen(site, now);
    if (ofSite && ofSite.lines >= this.perMinute * SITE_TIMES_ADDRESS) {
      ofSite.unlogged += 1;
      return { log: false, unlogged: ofSite.unlogged };
    }
    const ofAddress = this.seen(address, now);
    if (ofAddress.lines >= this.perMinute) {
      ofAddress.unlogged += 1;
      return { log: false, unlogged: ofAddress.unlogged };
    }
    let unlogged = 0;
    for (const seen of ofSite ? [ofAddress, ofSite] : [ofAddress]) {
      seen.lines += 1;
      unlogged += seen.unlogged;
      seen.unlogged = 0;
    }
    return { log: true, unlogged };
  }

  /** `address`'s (or a site's) count, its minute begun afresh once over. */
  private seen(address: string, now: number): Seen {
    let seen = this.byAddress.get(address);
    if (!seen) {
      if (this.byAddress.size >= ADDRESSES_MAX) this.byAddress.clear();
      seen = { from: now, lines: 0, unlogged: 0 };
      this.byAddress.set(address, seen);
    }
    if (now - seen.from >= WINDOW_MS) {
      seen.from = now;
      seen.lines = 0;
    }
    return seen;
  }
}
