/** Refusal lines (`request refused`) logged per client address in a minute; past them counted, and said at the next line logged. */
export const REFUSAL_LINES_PER_MINUTE = 20;

const WINDOW_MS = 60_000;
/** Addresses remembered at once; past it all are forgotten (each then logs its next lines again). */
const ADDRESSES_MAX = 10_000;

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
  private readonly byAddress = new Map<string, { from: number; lines: number; unlogged: number }>();

  constructor(
    private readonly perMinute = REFUSAL_LINES_PER_MINUTE,
    private readonly now: () => number = Date.now,
  ) {}

  /** One refusal answered to `address` (an IPv6 address's /64: `rateSource`): whether to log it, and what went unlogged before it. */
  refused(address: string): RefusalLine {
    const now = this.now();
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
    if (seen.lines >= this.perMinute) {
      seen.unlogged += 1;
      return { log: false, unlogged: seen.unlogged };
    }
    seen.lines += 1;
    const unlogged = seen.unlogged;
    seen.unlogged = 0;
    return { log: true, unlogged };
  }
}
