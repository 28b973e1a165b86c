import { randomUUID } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { Job, Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import { SHARD_OP_PREFIX, type ShardOpJobData, type ShardOpOutcome } from '../contracts/shard-op.ts';
import { AgentDbError } from '../errors.ts';
import { connectRedis } from '../redis/connection.ts';
import { handleErrorEvents } from '../redis/error-events.ts';
import { keysFor, type Keys } from '../redis/keys.ts';

/** How often a waiting op looks at its job, in case its completion event went unheard. */
const POLL_MS = 1000;

/** While no worker has taken an op (see `run`'s `pickup`). */
export interface PickupWatch {
  /** Called once, when no worker has taken the op after `noteAfterMs` (default 5 s). */
  onUnclaimed?: (waitedMs: number) => void;
  noteAfterMs?: number;
  /** Past it, an op no worker took is withdrawn (it never runs) and `run` rejects with NO_WORKER. */
  timeoutMs?: number;
}

/** Options of a {@link ShardOpClient}. */
export interface ShardOpClientOptions {
  redisUrl: string;
  prefix: string;
}

/**
 * Runs shard ops (see `ShardOpJobData`) on a shard's queue and waits for their outcome, with
 * BullMQ's own `QueueEvents` and `waitUntilFinished`: ops are few and not on the calls' hot
 * path, so they need none of the client's event stream machinery.
 */
export class ShardOpClient {
  private readonly keys: Keys;
  private readonly redis: Redis;
  private readonly queues = new Map<number, { queue: Queue; events: QueueEvents; conn: Redis; ready: Promise<unknown> }>();

  constructor(private readonly opts: ShardOpClientOptions) {
    this.keys = keysFor(opts.prefix);
    this.redis = connectRedis(opts.redisUrl, { name: 'agentdb-ops' });
    this.redis.setMaxListeners(0);
  }

  /**
   * Enqueues `op` on `shard` and waits for its outcome. Rejects only on a fault (no outcome
   * within `timeoutMs`, a job that failed after its retries); answers agent errors as `ok: false`.
   */
  async run(shard: number, op: string, args: unknown, opts: { db?: string; timeoutMs?: number; onProgress?: (progress: unknown) => void; pickup?: PickupWatch } = {}): Promise<ShardOpOutcome> {
    const q = this.forShard(shard);
    await q.ready;
    const data: ShardOpJobData = { op, args, enqueuedAt: Date.now(), ...(opts.db ? { db: opts.db } : {}) };
    const jobId = `op.${randomUUID()}`;
    // Long ops (a backup) report progress with `job.updateProgress`; BullMQ's QueueEvents carries it.
    const onProgress = opts.onProgress && ((e: { jobId: string; data: unknown }) => e.jobId === jobId && opts.onProgress!(e.data));
    if (onProgress) q.events.on('progress', onProgress);
    try {
      return await this.add(q, shard, op, data, jobId, opts.timeoutMs, opts.pickup);
    } finally {
      if (onProgress) q.events.off('progress', onProgress);
    }
  }

  private async add(q: ReturnType<ShardOpClient['forShard']>, shard: number, op: string, data: ShardOpJobData, jobId: string, timeoutMs: number | undefined, pickup: PickupWatch | undefined): Promise<ShardOpOutcome> {
    const job = await q.queue.add(`${SHARD_OP_PREFIX}${op}`, data, {
      jobId,
      attempts: 3,
      backoff: { type: 'exponential', delay: 500 },
      // Kept briefly so a waiter that subscribed late still finds the outcome on the job.
      removeOnComplete: { age: 300 },
      removeOnFail: { age: 3600 },
    });
    // The event is the fast path; a look at the job every second is the net under it: a new user
    // saw `agentdb backup now` wait forever for ops whose jobs had finished (an event reader
    // that started late). Whichever answers first wins.
    // The same look tells whether any worker took the op: a new user whose CLI had the wrong
    // AGENTDB_PREFIX (or no worker running) saw `agentdb history` wait silently, then die with a
    // BullMQ stack trace, and an interrupted `restore` stay queued to run whenever a worker came.
    const addedAt = Date.now();
    let noted = false;
    let timer: NodeJS.Timeout | undefined;
    const polled = new Promise<ShardOpOutcome>((resolve, reject) => {
      timer = setInterval(() => {
        void Job.fromId(q.queue, jobId).then(
          async (j) => {
            if (j && !j.processedOn && pickup) {
              const waited = Date.now() - addedAt;
              if (!noted && waited >= (pickup.noteAfterMs ?? 5000)) {
                noted = true;
                pickup.onUnclaimed?.(waited);
              }
              if (pickup.timeoutMs !== undefined && waited >= pickup.timeoutMs) {
                // A worker listening on the shard's queue is busy, not absent: the op waits its
                // turn behind the calls before it (BullMQ names its connections; where Redis
                // refuses CLIENT LIST, no worker can be seen and the op is withdrawn).
                if ((await q.queue.getWorkersCount().catch(() => 0)) > 0) return;
                // Fails when a worker took it meanwhile (locked): then it is waited for as usual.
                const withdrawn = await j.remove().then(() => true, () => false);
                if (!withdrawn) return;
                reject(new AgentDbError('NO_WORKER', `no worker took ${op} (shard ${shard}${data.db ? `, ${data.db}` : ''}) within ${pickup.timeoutMs / 1000} s`));
                // Settles BullMQ's waitUntilFinished, whose timer would otherwise hold a CLI process
                // open for the op's whole timeout (BullMQ's Queue.close does not end it).
                (q.events as unknown as EventEmitter).emit(`failed:${jobId}`, { failedReason: 'withdrawn: no worker took it' });
              }
              return;
            }
            if (!j?.finishedOn) return;
            if (j.returnvalue !== undefined && j.returnvalue !== null) resolve(j.returnvalue as ShardOpOutcome);
            else if (j.failedReason && j.attemptsMade >= (j.opts.attempts ?? 1)) reject(new Error(j.failedReason));
          },
          () => undefined,
        );
      }, POLL_MS);
    });
    try {
      return await Promise.race([job.waitUntilFinished(q.events, timeoutMs ?? 60_000) as Promise<ShardOpOutcome>, polled]);
    } finally {
      clearInterval(timer);
    }
  }

  /** Closes the queues and their event readers. */
  async close(): Promise<void> {
    const all = [...this.queues.values()];
    await Promise.all(all.map((q) => q.ready.catch(() => undefined)));
    await Promise.all(all.flatMap((q) => [q.queue.close(), q.events?.close()]));
    for (const q of all) q.conn.disconnect();
    this.redis.disconnect();
  }

  private forShard(shard: number) {
    let q = this.queues.get(shard);
    if (!q) {
      const name = this.keys.queueName(shard);
      const queue = new Queue(name, { connection: this.redis, prefix: this.keys.bullPrefix });
      handleErrorEvents(queue);
      // QueueEvents blocks on its stream, so it needs a connection of its own. It reads from the
      // stream's last event as it stands now, not from '$' (whatever comes after its first
      // blocking read, issued some time after it is "ready"): an op answered in between would
      // otherwise go unheard, and its caller would wait out its whole timeout.
      const conn = connectRedis(this.opts.redisUrl, { blocking: true, name: 'agentdb-op-events' });
      const holder = { queue, conn } as { queue: Queue; conn: Redis; events: QueueEvents; ready: Promise<unknown> };
      holder.ready = (async () => {
        const last = (await this.redis.xrevrange(`${this.keys.bullPrefix}:${name}:events`, '+', '-', 'COUNT', 1))[0]?.[0];
        holder.events = new QueueEvents(name, { connection: conn, prefix: this.keys.bullPrefix, lastEventId: last ?? '0-0' });
        handleErrorEvents(holder.events);
        await holder.events.waitUntilReady();
      })();
      q = holder;
      this.queues.set(shard, q);
    }
    return q;
  }
}
