import { Queue, type Telemetry } from 'bullmq';
import type { Redis } from 'ioredis';
import { handleErrorEvents } from './error-events.ts';
import type { Keys } from './keys.ts';
import { quietLateInitErrors } from './late-init-errors.ts';

/**
 * How many events BullMQ keeps in a shard queue's event stream (trimmed, about, at each add;
 * BullMQ's default is 10,000). A `completed` event carries the call's envelope (up to
 * MAX_RESULT_BYTES), and the stream is trimmed by count, never by age: at 10,000 (about 2,400
 * calls) a shard's stream kept ~150 MB of envelopes, 2.4 GB over 16 shards, long after the
 * workspace budget had let them go (hostile review: 40 calls of a 60 KB row left 2.7 MB there).
 * Only shard ops' `QueueEvents` read it, as events come (agentdb's own events stream tells of
 * calls). Every `Queue` of a shard must pass it: each writes it into the queue's meta at start.
 */
export const SHARD_QUEUE_EVENTS_MAX_LEN = 1000;

/**
 * One BullMQ `Queue` per shard, opened on first use over one shared connection and closed
 * together: what enqueues onto the shard queues (the client library) and what releases parked
 * jobs on them (approvals) both keep one. Closing closes the queues, not the connection.
 */
export class ShardQueues {
  private readonly queues = new Map<number, Queue>();
  /** Shards whose queue's connection is up and whose settings (meta) BullMQ has sent. */
  private readonly readied = new Set<number>();

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    /** BullMQ's tracing (a caller's tracing on): each add carries its trace in the job. */
    private readonly telemetry?: Telemetry,
  ) {}

  /** The queue of `shard`, opened on first use. */
  of(shard: number): Queue {
    let queue = this.queues.get(shard);
    if (!queue) {
      queue = new Queue(this.keys.queueName(shard), {
        connection: this.redis,
        prefix: this.keys.bullPrefix,
        streams: { events: { maxLen: SHARD_QUEUE_EVENTS_MAX_LEN } },
        ...(this.telemetry ? { telemetry: this.telemetry } : {}),
      });
      handleErrorEvents(queue);
      this.queues.set(shard, queue);
      // Settled after BullMQ's own then on the same promise, which sends the queue's meta: once
      // marked, a job added without awaiting it still goes after the settings.
      const opened = queue;
      opened.waitUntilReady().then(
        () => this.queues.get(shard) === opened && this.readied.add(shard),
        () => undefined,
      );
    }
    return queue;
  }

  /** Whether the queue of `shard` is ready ({@link of} it, then `waitUntilReady`), known without an await. */
  ready(shard: number): boolean {
    return this.readied.has(shard);
  }

  /** Closes every queue opened so far (not the connection they share). */
  async close(): Promise<void> {
    const open = [...this.queues.values()];
    this.queues.clear();
    this.readied.clear();
    // A queue still opening (asking Redis its version) must not end the process when that question
    // fails after the close: the caller's next step is often to drop the connection.
    for (const q of open) quietLateInitErrors(q);
    await Promise.all(open.map((q) => q.close()));
  }
}
