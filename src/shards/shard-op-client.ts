import { randomUUID } from 'node:crypto';
import { Job, Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import { SHARD_OP_PREFIX, opWorkspace, type ShardOpJobData, type ShardOpOutcome } from '../contracts/shard-op.ts';
import { placeAdded } from '../redis/fair-place-added.ts';
import { AgentDbError } from '../errors.ts';
import { connectRedis } from '../redis/connection.ts';
import { handleErrorEvents } from '../redis/error-events.ts';
import { keysFor, type Keys } from '../redis/keys.ts';
import { quietLateInitErrors } from '../redis/late-init-errors.ts';
import { quitWithin } from '../redis/quit-within.ts';
import { RedisOutage } from '../redis/redis-outage.ts';
import { SHARD_QUEUE_EVENTS_MAX_LEN } from '../redis/shard-queues.ts';
import { finishedEvent } from './op-finished-event.ts';
import { gone, opFailure, whetherItRuns } from './op-failure.ts';
import { stalledTwice } from '../calls/call-answers.ts';
import { unspill, type WireOutcome } from './op-result-spill.ts';

/** How often a waiting op looks at its job, in case its completion event went unheard. */
const POLL_MS = 1000;

/** How long close() lets the replies still due on the ops connection come back before dropping it. */
const QUIT_WAIT_MS = 1000;

/** While no worker has taken an op (see `run`'s `pickup`). */
export interface PickupWatch {
  /** Called once, when no worker has taken the op after `noteAfterMs` (default 5 s). */
  onUnclaimed?: (waitedMs: number) => void;
  noteAfterMs?: number;
  /** Past it, an op no worker took is withdrawn (it never runs) and `run` rejects with NO_WORKER. */
  timeoutMs?: number;
}

/** How far an op got, for the answer when Redis is lost (see `ShardOpClient.run`). */
interface Sent {
  /** Its add was sent to Redis (it may be there even if no reply came). */
  toRedis: boolean;
  /** It was answered UNAVAILABLE: nothing more is sent for it. */
  gaveUp: boolean;
}

/** Options of a {@link ShardOpClient}. */
export interface ShardOpClientOptions {
  redisUrl: string;
  prefix: string;
}

/**
 * Runs shard ops (see `ShardOpJobData`) on a shard's queue and waits for their outcome, with
 * BullMQ's own `QueueEvents` (see {@link finishedEvent}): ops are few and not on the calls' hot
 * path, so they need none of the client's event stream machinery.
 */
export class ShardOpClient {
  private readonly keys: Keys;
  private readonly redis: Redis;
  private readonly queues = new Map<number, { queue: Queue; events: QueueEvents; conn: Redis; ready: Promise<unknown> }>();
  private readonly outage: RedisOutage;
  /** Aborted by `close`: an op still waiting then is answered at once, not at its timeout. */
  private readonly closed = new AbortController();

  constructor(private readonly opts: ShardOpClientOptions) {
    this.keys = keysFor(opts.prefix);
    this.redis = connectRedis(opts.redisUrl, { name: 'agentdb-ops' });
    // Every shard queue shares this one connection, each adding its own listeners. Infinity, not
    // 0: BullMQ adds 3 to a connection's limit for each queue on it, which turned 0 ("none")
    // into a limit of 3, and ioredis's reconnect went past it with a MaxListenersExceededWarning.
    this.redis.setMaxListeners(Infinity);
    this.outage = new RedisOutage(this.redis, opts.redisUrl);
  }

  /**
   * Enqueues `op` on `shard` and waits for its outcome. Rejects only on a fault (no outcome
   * within `timeoutMs`, a job that failed after its retries); answers agent errors as `ok: false`.
   *
   * When Redis drops and has not come back within a few seconds (see {@link RedisOutage}), it
   * rejects with UNAVAILABLE naming Redis's URL and saying whether the op may still run (it had
   * reached Redis, and runs if Redis returns with its data) or not. Without this `agentdb
   * restore`, `backup now` and `history` waited on in silence (40 s and more; over 300 s once):
   * BullMQ's wait does not notice an outage, and the look at the job every second failed quietly.
   */
  async run(
    shard: number,
    op: string,
    args: unknown,
    opts: { db?: string; timeoutMs?: number; onProgress?: (progress: unknown) => void; pickup?: PickupWatch } = {},
  ): Promise<ShardOpOutcome> {
    const data: ShardOpJobData = { op, args, enqueuedAt: Date.now(), ...(opts.db ? { db: opts.db } : {}) };
    const jobId = `op.${randomUUID()}`;
    const sent: Sent = { toRedis: false, gaveUp: false };
    let stopListening = (): void => {};
    const lost = new Promise<never>((_, reject) => {
      stopListening = this.outage.onLost((why) => {
        sent.gaveUp = true;
        reject(new AgentDbError('UNAVAILABLE', `${why} ${whetherItRuns(op, shard, data.db, sent.toRedis)}`));
      });
    });
    // The rejection is read by whichever race is on when it comes; none may be left unheard.
    lost.catch(() => undefined);
    try {
      // A large result comes by reference (op-result-spill.ts): read once, and gone from Redis.
      return await unspill(this.redis, (await Promise.race([this.enqueueAndWait(shard, data, jobId, sent, lost, opts), lost])) as WireOutcome);
    } finally {
      stopListening();
    }
  }

  private async enqueueAndWait(
    shard: number,
    data: ShardOpJobData,
    jobId: string,
    sent: Sent,
    lost: Promise<never>,
    opts: { timeoutMs?: number; onProgress?: (progress: unknown) => void; pickup?: PickupWatch },
  ): Promise<ShardOpOutcome> {
    const q = this.forShard(shard);
    await q.ready;
    // Answered "never reached Redis" while this waited: it must not be sent now.
    if (sent.gaveUp) return lost;
    // Long ops (a backup) report progress with `job.updateProgress`; BullMQ's QueueEvents carries it.
    const onProgress = opts.onProgress && ((e: { jobId: string; data: unknown }) => e.jobId === jobId && opts.onProgress!(e.data));
    if (onProgress) q.events.on('progress', onProgress);
    try {
      return await this.add(q, shard, data.op, data, jobId, opts.timeoutMs, opts.pickup, sent, lost);
    } finally {
      if (onProgress) q.events.off('progress', onProgress);
    }
  }

  private async add(
    q: ReturnType<ShardOpClient['forShard']>,
    shard: number,
    op: string,
    data: ShardOpJobData,
    jobId: string,
    timeoutMs: number | undefined,
    pickup: PickupWatch | undefined,
    sent: Sent,
    lost: Promise<never>,
  ): Promise<ShardOpOutcome> {
    // Set before the reply: a job whose add was written when Redis died may be in its AOF.
    sent.toRedis = true;
    await q.queue.add(`${SHARD_OP_PREFIX}${op}`, data, {
      jobId,
      attempts: 3,
      backoff: { type: 'exponential', delay: 500 },
      // Kept briefly so a waiter that subscribed late still finds the outcome on the job; its
      // caller removes it once read (enqueueAndWait), so only a caller gone leaves it this long.
      removeOnComplete: { age: 300 },
      removeOnFail: { age: 3600 },
    });
    // In its workspace's turn once the shard's queue is long, as a call is (`fair-place.lua`): on
    // the wait list, first come first taken, one workspace's restores, dry runs, grid pages and
    // exports (a database each, as many as it has) went ahead of another's one read (T12).
    const workspace = opWorkspace(data);
    if (workspace !== undefined) await placeAdded(q.queue, jobId, this.keys.redisBudget(workspace).ledger);
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
                const withdrawn = await j.remove().then(
                  () => true,
                  () => false,
                );
                if (!withdrawn) return;
                reject(
                  new AgentDbError('NO_WORKER', `no worker took ${op} (shard ${shard}${data.db ? `, ${data.db}` : ''}) within ${pickup.timeoutMs / 1000} s`),
                );
              }
              return;
            }
            // Gone before it finished (a finished op's job is kept 5 minutes): a Redis back empty
            // within the outage's few seconds, unnoticed by it. `backup now` waited its 6 hours
            // for it (fault review F4, session 29).
            if (!j) {
              reject(new AgentDbError('UNAVAILABLE', gone(op, shard, data.db)));
              return;
            }
            if (!j?.finishedOn) return;
            if (j.returnvalue !== undefined && j.returnvalue !== null) resolve(j.returnvalue as ShardOpOutcome);
            else if (j.failedReason && (j.attemptsMade >= (j.opts.attempts ?? 1) || stalledTwice(j.failedReason)))
              reject(opFailure(op, shard, data.db, j.failedReason));
          },
          () => undefined,
        );
      }, POLL_MS);
    });
    const outcome = finishedEvent(q.events, jobId, timeoutMs ?? 60_000, this.closed.signal, (reason) => opFailure(op, shard, data.db, reason));
    let answer: ShardOpOutcome;
    try {
      answer = await Promise.race([outcome.finished, polled, lost]);
    } catch (err) {
      // A job failed for good has told its one caller: it goes now, not an hour later with its arguments
      // and stack (T14's leftover); one still waiting or running (a timeout here) stays.
      const failed = q.queue.getJobState(jobId).then((state) => (state === 'failed' ? q.queue.remove(jobId) : 0));
      await Promise.race([failed.catch(() => 0), lost.catch(() => 0)]);
      throw err;
    } finally {
      clearInterval(timer);
      outcome.stop();
    }
    // Its one caller has the outcome: the job goes now, not 5 minutes later. Kept, each held its
    // result inline (up to OP_INLINE_BYTES) in no workspace's budget: an admin paging activity
    // at 16 KiB a page left 34 MB of jobs in 10 s (hostile review T14). Not waited for past an outage.
    await Promise.race([q.queue.remove(jobId).catch(() => 0), lost.catch(() => 0)]);
    return answer;
  }

  /**
   * Closes the queues and their event readers. During a Redis outage it does not wait for
   * Redis: an event reader not yet ready waits for it for good (and so did this close, holding
   * a CLI process open after it had answered UNAVAILABLE).
   */
  async close(): Promise<void> {
    this.closed.abort();
    const all = [...this.queues.values()];
    // One still opening when Redis is dropped below must not end the process (see quietLateInitErrors).
    for (const q of all) for (const closing of [q.queue, q.events]) if (closing) quietLateInitErrors(closing);
    const graceful = async () => {
      await Promise.all(all.map((q) => q.ready.catch(() => undefined)));
      await Promise.all(all.flatMap((q) => [q.queue.close(), q.events?.close()]));
    };
    if (this.redis.status === 'ready') {
      let stopListening = (): void => {};
      const lost = new Promise<void>((resolve) => (stopListening = this.outage.onLost(() => resolve())));
      await Promise.race([graceful(), lost]).finally(stopListening);
    } else {
      // Closing marks each reader closed, so it stops retrying its read; nothing waits on Redis.
      for (const q of all) {
        void q.queue.close().catch(() => undefined);
        void q.events?.close().catch(() => undefined);
      }
    }
    this.outage.stop();
    for (const q of all) q.conn.disconnect();
    // BullMQ's waitUntilFinished sends its own look at the job (the isFinished script) on this
    // connection and does not listen for its reply once the completed event has answered: a
    // disconnect() with that reply still due rejected it inside BullMQ, where nobody hears it,
    // and `agentdb history` died after printing its answer (exit 1, "Connection is closed.")
    // about one run in fifteen. QUIT is answered after every command sent before it; bounded,
    // so a Redis that stops answering cannot hold a CLI process open.
    if (this.redis.status === 'ready') await quitWithin(this.redis, QUIT_WAIT_MS);
    else this.redis.disconnect();
  }

  private forShard(shard: number) {
    let q = this.queues.get(shard);
    if (!q) {
      const name = this.keys.queueName(shard);
      const queue = new Queue(name, { connection: this.redis, prefix: this.keys.bullPrefix, streams: { events: { maxLen: SHARD_QUEUE_EVENTS_MAX_LEN } } });
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
