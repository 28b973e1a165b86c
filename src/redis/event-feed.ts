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
  // each read races this, so a feed closed then ends instead of hanging its `for await`.
  private wake!: () => void;
  private readonly closing = new Promise<null>((resolve) => (this.wake = () => resolve(null)));

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
        const from = await Promise.race([this.lastId, this.closing]);
        if (from === null) return { value: undefined, done: true };
        reply = (await Promise.race([this.conn.xread('COUNT', 100, 'BLOCK', 5000, 'STREAMS', this.streamKey, from), this.closing])) as typeof reply;
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

  /** Stops the feed and closes its connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.wake();
    this.conn.disconnect();
    this.onClose();
  }
}
