import { Job, QueueKeys, type Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { withScripts } from '../redis/lua-scripts.ts';
import type { Logger } from '../logger.ts';

function heldKey(token: string, jobId: string): string {
  return `${token}\u0000${jobId}`;
}

/**
 * Hands back to its queue a job this process's shard worker was handed as Redis died, once Redis
 * returns with its data (AOF): the job moved to `active` under a lock of ours, but the reply
 * carrying it was lost with the connection, so no processor here runs it and nobody renews its
 * lock. It stayed active until the lock lapsed (`LOCK_DURATION_MS`, 30 s), and its caller waited
 * that long after Redis was back (1 run in 14 of the Redis-fault test). The same happens to the
 * next job BullMQ hands over with a completion whose reply is lost.
 *
 * After the connection is ready again, the owner looks twice, a tick apart, at each owned shard's
 * active jobs: one whose lock carries the same value both times, and whose lock token no processor
 * here held either time, is moved back to `wait` (BullMQ's own move, which checks that the lock
 * still holds that value), and runs again at once. Only the shard's lease holder runs its jobs, so
 * no other process can be running it. Looking twice leaves alone a job still being delivered to a
 * processor, or one whose completion is on its way, at the first look. A job run again is safe: a
 * write finds its recorded call id.
 */
export class UnheldJobs {
  /**
   * The jobs this process holds (by lock token and job id: BullMQ locks the next job a completion
   * hands over with the same token), since when: from the processor's start until BullMQ has
   * stored the job's end ({@link ended}). A processor that finished during the outage leaves
   * BullMQ retrying the completion every 15 s (its `runRetryDelay`): the job is still active
   * under our lock meanwhile, and handing it back would run it twice.
   */
  private readonly held = new Map<string, number>();
  /** Redis came back: look at the next tick. */
  private due = false;
  /** The first look's finds, by shard: job id → lock value, for the second look. */
  private seen?: Map<number, Map<string, string>>;

  constructor(
    private readonly redis: Redis,
    private readonly bullPrefix: string,
    private readonly logger: Logger,
  ) {}

  /**
   * A processor starts the job locked by `token`: held from now until {@link ended}, or until it
   * throws, having moved the job away itself ({@link thrown}).
   */
  take(token: string, jobId: string): void {
    this.forgetStale();
    this.held.set(heldKey(token, jobId), Date.now());
  }

  /** The processor of a job it {@link take}s threw `err`: a job it moved away itself is no longer held. */
  thrown(token: string, jobId: string, err: unknown): void {
    if ((err as Error | undefined)?.name === 'DelayedError') this.held.delete(heldKey(token, jobId));
  }

  /** BullMQ stored the end of job `jobId` locked by `token` (its worker's `completed` or `failed`). */
  ended(token: string | undefined, jobId: string | undefined): void {
    if (token && jobId) this.held.delete(heldKey(token, jobId));
  }

  /**
   * Forgets holds over an hour old: a job whose end BullMQ never stored (its lock was lost, and
   * the job ran again elsewhere) raises neither event. An hour is past any lock and retry.
   */
  private forgetStale(): void {
    if (this.held.size < 1024) return;
    const before = Date.now() - 3600_000;
    for (const [token, since] of this.held) if (since < before) this.held.delete(token);
  }

  /** The connection is ready again after it dropped: the next {@link check} looks. */
  reconnected(): void {
    this.due = true;
    this.seen = undefined;
  }

  /**
   * One step, each tick: the first look after a reconnect, or the second, which hands back what
   * both found. `workers` are the owned shards' workers, by shard.
   * @returns how many jobs were handed back.
   */
  async check(workers: ReadonlyMap<number, Worker>): Promise<number> {
    if (this.seen) {
      const first = this.seen;
      this.seen = undefined;
      let moved = 0;
      for (const [shard, jobs] of first) {
        const worker = workers.get(shard);
        if (!worker) continue;
        const now = await this.unheld(worker);
        for (const [id, lock] of jobs) {
          if (now.get(id) !== lock) continue;
          const job = await Job.fromId(worker, id);
          try {
            await job?.moveToWait(lock);
            if (job) moved++;
          } catch (err) {
            // It moved on meanwhile (finished, its lock lapsed or renewed): nothing to hand back.
            this.logger.debug({ shard, jobId: id, err: String(err) }, 'unheld job moved on before it was handed back');
          }
        }
        if (moved) this.logger.info({ shard, jobs: moved }, 'handed back jobs taken as Redis died, which no processor here ran');
      }
      return moved;
    }
    if (!this.due) return 0;
    this.due = false;
    const found = new Map<number, Map<string, string>>();
    for (const [shard, worker] of workers) {
      const jobs = await this.unheld(worker);
      if (jobs.size) found.set(shard, jobs);
    }
    if (found.size) this.seen = found;
    return 0;
  }

  /** The worker's queue's active jobs locked by a token no processor here holds: id → lock. */
  private async unheld(worker: Worker): Promise<Map<string, string>> {
    const keys = new QueueKeys(this.bullPrefix).getKeys(worker.name);
    const flat = await withScripts(this.redis).agentdbActiveLocks(keys.active!, keys['']!);
    const out = new Map<string, string>();
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const [id, lock] = [flat[i]!, flat[i + 1]!];
      // No lock: BullMQ's stalled check hands it back already.
      if (lock && !this.held.has(heldKey(lock, id))) out.set(id, lock);
    }
    return out;
  }
}
