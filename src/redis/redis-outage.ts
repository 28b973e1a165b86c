import type { Redis } from 'ioredis';
import { FIRST_ANSWER_MS, shownUrl } from './connection.ts';

/**
 * Tells the calls in flight on a connection that Redis has gone: {@link lost} resolves once the
 * connection has dropped and not come back within `graceMs`. A command sent meanwhile waits in
 * ioredis's offline queue for 20 reconnect attempts (~10.6 s) and then rejects with
 * `MaxRetriesPerRequestError`, and a call waiting for its completion event waits for good: a
 * tester's calls in flight when Redis died rejected with that driver error, and 141 of 150 of
 * them then ran when Redis came back. Racing each call against this answers it UNAVAILABLE
 * within seconds instead. A blip shorter than `graceMs` (a failover, a restart with AOF)
 * fails nothing.
 */
export class RedisOutage {
  // A set of listeners rather than one shared promise: a call that ends removes its own, where
  // a reaction added to a pending promise stays until it settles (every call while Redis stays
  // up would have been kept).
  private readonly listeners = new Set<(why: string) => void>();
  private timer?: NodeJS.Timeout;
  private closedAt?: number;

  constructor(
    private readonly redis: Redis,
    private readonly url: string,
    private readonly graceMs = FIRST_ANSWER_MS,
  ) {
    redis.on('close', () => this.dropped());
    redis.on('ready', () => this.back());
  }

  /**
   * Calls `listener` once, with a message naming Redis's URL, when the connection has been
   * down for `graceMs`; never while it stays up. Returns the function that stops listening.
   */
  onLost(listener: (why: string) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Stops watching (the client closes its connection on purpose). */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private dropped(): void {
    if (this.timer || this.redis.status === 'end') return;
    this.closedAt = Date.now();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.redis.status === 'ready') return;
      // The next outage is a new one: a call made after Redis returns must not hear of this one.
      const told = [...this.listeners];
      this.listeners.clear();
      const s = Math.round((Date.now() - (this.closedAt ?? Date.now())) / 100) / 10;
      for (const listener of told)
        listener(
          `Redis at ${shownUrl(this.url)} does not answer (the connection dropped ${s} s ago and has not come back). Start it, or point REDIS_URL at one that runs.`,
        );
    }, this.graceMs);
    this.timer.unref();
  }

  private back(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
