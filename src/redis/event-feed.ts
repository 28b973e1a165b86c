import type { Redis } from 'ioredis';
import { latestEventId, parseEntry, type StreamedEvent } from './events.ts';

/**
 * An async iterator over agentdb's event stream from a given position, on a blocking
 * connection of its own: `for await (const e of client.events({ from: lastSeenId }))`.
 * A runtime that stores each event's id can resume exactly where it stopped.
 */
export class EventFeed implements AsyncIterableIterator<StreamedEvent> {
  private lastId: Promise<string>;
  private readonly buffer: StreamedEvent[] = [];
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
  ) {
    // `$` is pinned to the newest id now, so events published right after this call are seen.
    this.lastId = from === '$' ? latestEventId(redis, streamKey) : Promise.resolve(from);
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<StreamedEvent> {
    return this;
  }

  async next(): Promise<IteratorResult<StreamedEvent>> {
    while (this.buffer.length === 0) {
      if (this.closed) return { value: undefined, done: true };
      let reply: [string, [string, string[]][]][] | null;
      try {
        const from = await this.unlessClosed(this.lastId);
        if (from === null) return { value: undefined, done: true };
        reply = (await this.unlessClosed(this.conn.xread('COUNT', 100, 'BLOCK', 5000, 'STREAMS', this.streamKey, from))) as typeof reply;
        if (this.closed) return { value: undefined, done: true };
      } catch {
        if (this.closed) return { value: undefined, done: true };
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      for (const [, entries] of reply ?? []) {
        for (const entry of entries) {
          this.lastId = Promise.resolve(entry[0]);
          const event = parseEntry(entry);
          if (event) this.buffer.push(event);
        }
      }
    }
    return { value: this.buffer.shift()!, done: false };
  }

  async return(): Promise<IteratorResult<StreamedEvent>> {
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
