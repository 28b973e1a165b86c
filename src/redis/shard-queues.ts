import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { handleErrorEvents } from './error-events.ts';
import type { Keys } from './keys.ts';

/**
 * One BullMQ `Queue` per shard, opened on first use over one shared connection and closed
 * together: what enqueues onto the shard queues (the client library) and what releases parked
 * jobs on them (approvals) both keep one. Closing closes the queues, not the connection.
 */
export class ShardQueues {
  private readonly queues = new Map<number, Queue>();

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  /** The queue of `shard`, opened on first use. */
  of(shard: number): Queue {
    let queue = this.queues.get(shard);
    if (!queue) {
      queue = new Queue(this.keys.queueName(shard), { connection: this.redis, prefix: this.keys.bullPrefix });
      handleErrorEvents(queue);
      this.queues.set(shard, queue);
    }
    return queue;
  }

  /** Closes every queue opened so far (not the connection they share). */
  async close(): Promise<void> {
    const open = [...this.queues.values()];
    this.queues.clear();
    await Promise.all(open.map((q) => q.close()));
  }
}
