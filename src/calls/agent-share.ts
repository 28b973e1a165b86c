import { DelayedError, type Job } from 'bullmq';
import type { CallJobData } from '../contracts/call.ts';
import type { Logger } from '../logger.ts';
import { settled } from './settled.ts';

/**
 * How long a call put back stays delayed unless a call of its agent ends first (which wakes the
 * oldest one at once). It only matters when the wake-up is lost — the worker died, or the shard
 * moved to another worker — so it is short; each round costs the call a fetch and a move.
 */
export const DEFER_MS = 1000;

/**
 * An agent whose running calls all started less than this ago is busy, not stuck: a call over
 * its share waits in the worker for one of them to end instead of going back to the queue. Put
 * back, a call costs two Redis round trips and a fetch, and with 64 primary-key reads in flight
 * from one agent (the benchmark) going back every time cut throughput from 0.76 to 0.42 of
 * raw BullMQ; those calls take a few milliseconds each. A runaway statement passes this at once.
 */
export const YOUNG_MS = 100;

/** A call of an agent holding one of its turns, since when. */
export interface Turn {
  since: number;
}

/** A turn held: whose, and which (see `AgentShare.tryEnter`). */
export interface HeldTurn {
  readonly key: string;
  readonly agent: AgentCalls;
  readonly mine: Turn;
}

/** One agent's calls on one shard. */
export interface AgentCalls {
  /** Its running calls, oldest first. */
  running: Turn[];
  /** Calls over its share waiting in the worker: each is handed a turn (true) or sent away (false). */
  waiting: { turn: Turn; settle: (got: boolean) => void }[];
  /**
   * When the waiting calls are sent away unless its oldest running call has ended by then: one
   * timer for all of them, not one each. At 64 reads in flight from one agent (a share of 8 of
   * the worker's 32) three in four of its calls wait here, and each armed and cleared a timer of
   * its own (issue 31). Every waiter asks the same question (is the oldest running call still
   * young?), so one answer serves them all.
   */
  timer?: NodeJS.Timeout;
  /** Calls put back, oldest first: the next is woken when a call ends and nobody waits. */
  deferred: Map<string, Job>;
}

/**
 * At most `limit` calls of one agent run at once on one shard of this worker process. Without
 * it, one agent with 32 calls in flight held every BullMQ slot of its shard and other agents'
 * calls were withdrawn (NO_WORKER).
 *
 * A call over the share waits in the worker while the agent's running calls are young (they
 * will end soon); once the oldest is older than {@link YOUNG_MS}, it goes back to the queue
 * without holding a slot: the same job, moved to `delayed` the way parking does it
 * (moveToDelayed + DelayedError), woken by the end of one of the agent's calls. BullMQ's
 * `Job.moveToDelayed` skips the attempt (`attemptsMade` is not raised), so a call put back a
 * hundred times is never failed for it; only `attemptsStarted` grows, which nothing here limits
 * (no `maxStartedAttempts`). The count is per process: two workers never share a shard.
 */
export class AgentShare {
  private readonly agents = new Map<string, AgentCalls>();

  constructor(
    private readonly limit: number,
    private readonly logger: Logger,
    /** Whose share this is, for the log: `agent` (its calls), or `workspace` (WORKSPACE_SHARD_CONCURRENCY). */
    private readonly of: 'agent' | 'workspace' = 'agent',
  ) {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`);
  }

  /**
   * Runs `work` once the job's agent (or `who`: a workspace's shard ops) is under its share on
   * `shard`; or puts the job back (rejects with DelayedError, which BullMQ takes as "moved, not
   * failed"). Not an async function: a turn taken at once costs one promise, `work`'s own and
   * the one that gives the turn back (issue 31: at 64 reads in flight every call passes two
   * shares, and each async layer cost a promise, an await and a microtask more).
   */
  run<T>(job: Job<CallJobData>, token: string, shard: number, work: () => Promise<T>, who = `${job.data.workspace}/${job.data.agent}`): Promise<T> {
    const key = `${shard}\u0000${who}`;
    const agent = this.agentFor(key);
    agent.deferred.delete(job.id!);
    const mine: Turn = { since: Date.now() };
    if (agent.running.length < this.limit) {
      agent.running.push(mine);
      return this.within({ key, agent, mine }, work);
    }
    return this.turn(agent, mine).then((got) => (got ? this.within({ key, agent, mine }, work) : this.putBack(job, token, key)));
  }

  /**
   * A turn taken now, if the job's agent (or `who`) is under its share on `shard`: given back by
   * {@link leave}. Undefined when it is not: {@link run} then waits or puts the job back.
   */
  tryEnter(job: Job<CallJobData>, shard: number, who = `${job.data.workspace}/${job.data.agent}`): HeldTurn | undefined {
    const key = `${shard}\u0000${who}`;
    const agent = this.agentFor(key);
    if (agent.running.length >= this.limit) return undefined;
    agent.deferred.delete(job.id!);
    const mine: Turn = { since: Date.now() };
    agent.running.push(mine);
    return { key, agent, mine };
  }

  /** Gives back a turn {@link tryEnter} took: the oldest waiting call takes it, or the oldest put back is woken. */
  leave(held: HeldTurn): void {
    const { key, agent, mine } = held;
    agent.running.splice(agent.running.indexOf(mine), 1);
    this.next(key, agent);
  }

  /** Runs `work` in a turn held, and gives the turn back as it settles. */
  private within<T>(held: HeldTurn, work: () => Promise<T>): Promise<T> {
    return settled(work, () => this.leave(held));
  }

  /** Forgets the calls put back on a shard this process let go (they stay delayed in Redis). */
  forgetShard(shard: number): void {
    for (const [key, agent] of this.agents) if (key.startsWith(`${shard}\u0000`)) agent.deferred.clear();
  }

  /**
   * Waits for a turn while the agent's oldest running call is young; true once handed one (the
   * giver put `mine` among the running), false when the agent's calls are not young.
   */
  private turn(agent: AgentCalls, mine: Turn): Promise<boolean> {
    const left = (agent.running[0]?.since ?? 0) + YOUNG_MS - Date.now();
    if (left <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      agent.waiting.push({ turn: mine, settle: resolve });
      // The oldest running call only gets younger as calls end, so a timer already set is due
      // no later than this waiter's own would be; when it fires it looks again.
      agent.timer ??= setTimeout(() => this.check(agent), left);
    });
  }

  /**
   * Sends every waiting call away once the agent's oldest running call is no longer young; until
   * then, looks again when it will be. A timer that finds nobody waiting stops there.
   */
  private check(agent: AgentCalls): void {
    agent.timer = undefined;
    if (agent.waiting.length === 0) return;
    const left = (agent.running[0]?.since ?? 0) + YOUNG_MS - Date.now();
    if (left > 0) {
      agent.timer = setTimeout(() => this.check(agent), left);
      return;
    }
    for (const waiter of agent.waiting.splice(0)) waiter.settle(false);
  }

  /** A call ended: the oldest waiting call takes its turn, or else the oldest put back is woken. */
  private next(key: string, agent: AgentCalls): void {
    const waiter = agent.waiting.shift();
    if (waiter) {
      waiter.turn.since = Date.now();
      agent.running.push(waiter.turn);
      return waiter.settle(true);
    }
    const next = agent.deferred.values().next();
    if (!next.done) {
      agent.deferred.delete(next.value.id!);
      // Not found or no longer delayed (another worker ran it): nothing to do.
      next.value.promote().catch(() => undefined);
    }
    if (agent.running.length === 0 && agent.deferred.size === 0) this.agents.delete(key);
  }

  private agentFor(key: string): AgentCalls {
    let agent = this.agents.get(key);
    if (!agent) this.agents.set(key, (agent = { running: [], waiting: [], deferred: new Map() }));
    return agent;
  }

  private async putBack(job: Job<CallJobData>, token: string, key: string): Promise<never> {
    await job.moveToDelayed(Date.now() + DEFER_MS, token);
    const agent = this.agentFor(key);
    agent.deferred.set(job.id!, job);
    // A call of the agent may have ended while the job moved: it found nothing to wake.
    if (agent.running.length < this.limit) this.next(key, agent);
    if (this.logger.isLevelEnabled('debug'))
      this.logger.debug({ callId: job.id, agent: job.data.agent, limit: this.limit }, `call put back: its ${this.of} is at its share`);
    throw new DelayedError();
  }
}
