import type { Redis } from 'ioredis';
import type { PoolStatus } from '../executor/executor-status.ts';
import type { Keys } from '../redis/keys.ts';

/** What a worker process publishes about its executor pool. */
export interface WorkerExecutors {
  /** The worker's id (its shard-lease token). */
  worker: string;
  pid: number;
  /** Epoch ms when this was published. */
  at: number;
  shards: number[];
  pool: PoolStatus;
}

/** How often a worker publishes: `agentdb executors` is at most this stale. */
export const PUBLISH_EVERY_MS = 1000;
/** A status not refreshed for this long is gone: its worker stopped or hangs. */
const TTL_MS = 3 * PUBLISH_EVERY_MS;

/**
 * Publishes a worker's executor pool to Redis every second, so `agentdb executors` (another
 * process, maybe another host) can show what each child runs and for how long. One JSON value
 * per worker with a short TTL, and an index of worker ids scored by time, so a reader finds
 * every worker without scanning the keyspace and a dead worker's entry simply lapses.
 */
export class ExecutorStatusPublisher {
  private timer?: NodeJS.Timeout;
  private publishing?: Promise<void>;

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly snapshot: () => Omit<WorkerExecutors, 'at'>,
  ) {}

  /** Publishes now and then every second. */
  start(): void {
    const tick = () => {
      this.publishing ??= this.publish()
        .catch(() => undefined) // Redis down: the next tick tries again, the worker goes on
        .finally(() => (this.publishing = undefined));
    };
    tick();
    this.timer = setInterval(tick, PUBLISH_EVERY_MS);
    this.timer.unref();
  }

  /**
   * Stops publishing and removes this worker's entry. Not awaited: with Redis down the worker's
   * connection retries for ever, and a stopping worker must not wait on it (the entry lapses).
   */
  stop(): void {
    clearInterval(this.timer);
    const { worker } = this.snapshot();
    void (this.publishing ?? Promise.resolve())
      .then(() => this.redis.multi().del(this.keys.executorStatus(worker)).zrem(this.keys.executorsIndex, worker).exec())
      .catch(() => undefined);
  }

  private async publish(): Promise<void> {
    const at = Date.now();
    const status: WorkerExecutors = { ...this.snapshot(), at };
    await this.redis
      .multi()
      .set(this.keys.executorStatus(status.worker), JSON.stringify(status), 'PX', TTL_MS)
      .zadd(this.keys.executorsIndex, at, status.worker)
      .zremrangebyscore(this.keys.executorsIndex, '-inf', at - 10 * TTL_MS)
      .exec();
  }
}

/** Every worker's published status, newest first; lapsed ones are left out. */
export async function readExecutors(redis: Redis, keys: Keys): Promise<WorkerExecutors[]> {
  const ids = await redis.zrevrange(keys.executorsIndex, 0, -1);
  if (ids.length === 0) return [];
  const values = await redis.mget(ids.map((id) => keys.executorStatus(id)));
  return values.flatMap((v) => (v ? [JSON.parse(v) as WorkerExecutors] : []));
}
