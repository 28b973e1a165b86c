import { DelayedError, type Job } from 'bullmq';
import type { CallJobData } from '../contracts/call.ts';
import type { Logger } from '../logger.ts';

/**
 * How long a call put back stays delayed unless a call of its agent ends first (which wakes the
 * oldest one at once). It only matters when the wake-up is lost — the worker died, or the shard
 * moved to another worker — so it is short; each round costs the call a fetch and a move.
 */
export const DEFER_MS = 1000;

/**
 * At most `limit` calls of one agent run at once on one shard of this worker process; the
 * agent's next call goes back to the queue without holding a BullMQ slot, and runs once the
 * agent is under its share again. Without it, one agent with 32 calls in flight held every slot
 * of its shard and other agents' calls waited until they were withdrawn (NO_WORKER).
 *
 * A call put back is the same job, moved to `delayed` the way parking does it (moveToDelayed +
 * DelayedError). BullMQ's `Job.moveToDelayed` skips the attempt (`attemptsMade` stays as it
 * was), so a call put back a hundred times is never failed for it; only `attemptsStarted`
 * grows, which nothing here limits (no `maxStartedAttempts`). The count is per process: two
 * workers never share a shard, so this is per shard as well.
 */
export class AgentShare {
  private readonly running = new Map<string, number>();
  /** Calls put back, by agent and shard, oldest first: the next one is woken when a call ends. */
  private readonly deferred = new Map<string, Map<string, Job>>();

  constructor(
    private readonly limit: number,
    private readonly logger: Logger,
  ) {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`);
  }

  /**
   * Runs `work` when the job's agent is under its share on `shard`; otherwise puts the job
   * back (throws DelayedError, which BullMQ takes as "moved, not failed").
   */
  async run<T>(job: Job<CallJobData>, token: string, shard: number, work: () => Promise<T>): Promise<T> {
    const key = `${shard}\u0000${job.data.workspace}/${job.data.agent}`;
    this.deferred.get(key)?.delete(job.id!);
    const running = this.running.get(key) ?? 0;
    if (running >= this.limit) return this.putBack(job, token, key);
    this.running.set(key, running + 1);
    try {
      return await work();
    } finally {
      const left = this.running.get(key)! - 1;
      if (left) this.running.set(key, left);
      else this.running.delete(key);
      this.wake(key);
    }
  }

  /** Calls of `workspace/agent` running on `shard` now. */
  runningFor(shard: number, workspace: string, agent: string): number {
    return this.running.get(`${shard}\u0000${workspace}/${agent}`) ?? 0;
  }

  /** Forgets the calls put back on a shard this process let go (they stay delayed in Redis). */
  forgetShard(shard: number): void {
    for (const key of this.deferred.keys()) if (key.startsWith(`${shard}\u0000`)) this.deferred.delete(key);
  }

  private async putBack(job: Job<CallJobData>, token: string, key: string): Promise<never> {
    await job.moveToDelayed(Date.now() + DEFER_MS, token);
    let waiting = this.deferred.get(key);
    if (!waiting) this.deferred.set(key, (waiting = new Map()));
    waiting.set(job.id!, job);
    // A call of the agent may have ended while the job moved: it found nothing to wake.
    if ((this.running.get(key) ?? 0) < this.limit) this.wake(key);
    if (this.logger.isLevelEnabled('debug')) this.logger.debug({ callId: job.id, agent: job.data.agent, limit: this.limit }, 'call put back: its agent is at its share');
    throw new DelayedError();
  }

  private wake(key: string): void {
    const waiting = this.deferred.get(key);
    if (!waiting) return;
    const next = waiting.values().next();
    if (next.done) {
      this.deferred.delete(key);
      return;
    }
    const job = next.value;
    waiting.delete(job.id!);
    if (waiting.size === 0) this.deferred.delete(key);
    // Not found or no longer delayed (another worker ran it): nothing to do.
    job.promote().catch(() => undefined);
  }
}
