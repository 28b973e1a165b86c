import type { Redis } from 'ioredis';
import { idBefore, latestEventId, parseEntry } from './events.ts';
import type { FeedEvent, StreamedEvent } from './event-types.ts';

/** Entries a feed reads at once. */
const BATCH = 100;

/** What a feed of one workspace keeps, and gives back after a stretch trimmed under it. */
export interface FeedScope {
  /** Whether the feed hands on `event` (one of its workspace's). */
  keeps(event: StreamedEvent): boolean;
  /**
   * The events of the stretch between stream ids `after` and `before` (both exclusive) that the
   * feed can give back from elsewhere than the stream, oldest first (see `EventsMissed`).
   */
  replay(after: string, before: string): Promise<StreamedEvent[]>;
}

/**
 * An async iterator over agentdb's event stream from a given position, on a blocking
 * connection of its own: `for await (const e of client.events({ from: lastSeenId }))`.
 * A runtime that stores each event's id can resume exactly where it stopped; when the events
 * after that id were trimmed meanwhile (the stream is the service's, ~20,000 events, turned over
 * by a busy workspace in under a minute), it says so (`events.missed`) instead of going on as if
 * nothing was lost, first giving back what its scope can (its workspace's approval events).
 */
export class EventFeed implements AsyncIterableIterator<FeedEvent> {
  private lastId: Promise<string>;
  private readonly buffer: FeedEvent[] = [];
  private closed = false;
  // A read pending during a Redis outage is never settled by `disconnect()` (see EventReader):
  // `close` ends each wait under way by these, so a feed closed then ends instead of hanging its
  // `for await`. Not a race against one promise of the feed's life, which kept a reaction, and
  // the reply it held, for every read until the feed closed (see EventReader).
  private readonly wakes = new Set<() => void>();

  constructor(
    private readonly conn: Redis,
    redis: Redis,
    private readonly streamKey: string,
    from: string,
    private readonly onClose: () => void,
    private readonly scope?: FeedScope,
  ) {
    // `$` is pinned to the newest id now, so events published right after this call are seen.
    this.lastId = from === '$' ? latestEventId(redis, streamKey) : Promise.resolve(from);
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<FeedEvent> {
    return this;
  }

  async next(): Promise<IteratorResult<FeedEvent>> {
    while (this.buffer.length === 0) {
      if (this.closed) return { value: undefined, done: true };
      try {
        const from = await this.unlessClosed(this.lastId);
        if (from === null) return { value: undefined, done: true };
        const read = await this.unlessClosed(this.readAfter(from));
        if (read === null || this.closed) return { value: undefined, done: true };
        if (read.entries.length === 0) {
          // Nothing new: wait for the next event, then read it as above (the wait's own entries
          // are not taken: only the read above tells whether a stretch was trimmed before them).
          await this.unlessClosed(this.conn.xread('COUNT', 1, 'BLOCK', 5000, 'STREAMS', this.streamKey, from));
          continue;
        }
        if (read.first !== undefined && from !== '0' && from !== '0-0' && idBefore(from, read.first)) await this.missed(from, read.first);
        for (const entry of read.entries) {
          this.lastId = Promise.resolve(entry[0]);
          const event = parseEntry(entry);
          if (event && (!this.scope || this.scope.keeps(event))) this.buffer.push(event);
        }
      } catch {
        if (this.closed) return { value: undefined, done: true };
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    return { value: this.buffer.shift()!, done: false };
  }

  /**
   * The stream's oldest event and the events after `from`, read at one instant (MULTI): when
   * `from` comes before the oldest, every event between them was trimmed before this read, and
   * none after it is missing, since the stream trims its oldest first.
   */
  private async readAfter(from: string): Promise<{ first?: string; entries: [string, string[]][] }> {
    // A bare `<ms>` is `<ms>-0`, as XREAD reads it.
    const start = from.includes('-') ? from : `${from}-0`;
    const replies = await this.conn
      .multi()
      .xrange(this.streamKey, '-', '+', 'COUNT', 1)
      .xrange(this.streamKey, start, '+', 'COUNT', BATCH + 1)
      .exec();
    const [oldest, after] = (replies ?? []).map(([err, value]) => {
      if (err) throw err;
      return value as [string, string[]][];
    });
    // XRANGE's start is inclusive: the entry at `from` itself, already read, is not read again.
    const entries = (after ?? []).filter(([id]) => id !== start).slice(0, BATCH);
    return { ...(oldest?.[0] ? { first: oldest[0][0] } : {}), entries };
  }

  /** Hands on what the scope gives back of the stretch trimmed between `after` and `before`, then says so. */
  private async missed(after: string, before: string): Promise<void> {
    const replayed = this.scope ? await this.scope.replay(after, before) : [];
    for (const event of replayed) this.buffer.push({ ...event, id: after, replayed: true as const });
    this.buffer.push({ type: 'events.missed', id: after, after, before, givenBack: replayed.length, at: Date.now() });
  }

  async return(): Promise<IteratorResult<FeedEvent>> {
    await this.close();
    return { value: undefined, done: true };
  }

  /** `work`'s value, or null once the feed is closed (at once when it is already). */
  private unlessClosed<T>(work: Promise<T>): Promise<T | null> {
    if (this.closed) return Promise.resolve(null);
    return new Promise<T | null>((resolve, reject) => {
      const wake = () => resolve(null);
      this.wakes.add(wake);
      work.then(resolve, reject).finally(() => this.wakes.delete(wake));
    });
  }

  /** Stops the feed and closes its connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const wake of this.wakes) wake();
    this.wakes.clear();
    this.conn.disconnect();
    this.onClose();
  }
}
