import { randomUUID } from 'node:crypto';
import { Job, Queue, type JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import type { CallInput, CallJobData } from '../contracts/call.ts';
import { errorEnvelope, type Envelope } from '../contracts/envelope.ts';
import { connectRedis } from './connection.ts';
import { planCall } from './call-plan.ts';
import { EventReader, latestEventId, type StreamedEvent } from './events.ts';
import { keysFor, type Keys } from './keys.ts';

/** Options of an {@link AgentDbClient}. */
export interface AgentDbClientOptions {
  /** Default `redis://127.0.0.1:6379`. */
  redisUrl?: string;
  /** The deployment's key prefix (`AGENTDB_PREFIX`), default `agentdb`. */
  prefix?: string;
  /** Must match the workers' `SHARD_COUNT`; default 16. */
  shardCount?: number;
  /** How long finished calls keep their result in Redis, in seconds (default 7 days). */
  resultTtlS?: number;
}

/** Options of one call. */
export interface CallOptions {
  /** Wait for the outcome (default true). */
  wait?: boolean;
  /** How long a worker may take to pick the call up before it is withdrawn (default 30 s). */
  timeoutMs?: number;
}

/** The answer to a call not waited for: it is on its way, not finished. */
export interface PendingAnswer {
  ok: false;
  callId: string;
  tool: string;
  status: 'queued';
}

type Waiter = (envelope: Envelope) => void;

/**
 * The agent runtime's way into agentdb: enqueues tool calls straight onto the shard queues
 * and awaits their envelopes. One event-stream reader serves every call the client waits on.
 *
 * @example
 * const client = new AgentDbClient({ redisUrl, prefix: 'agentdb' });
 * const env = await client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' },
 *   tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } });
 */
export class AgentDbClient {
  private readonly keys: Keys;
  private readonly shardCount: number;
  private readonly resultTtlS: number;
  private readonly redis: Redis;
  private readonly queues = new Map<number, Queue>();
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly redisUrl: string;
  private reader?: Promise<EventReader>;
  private closed = false;

  constructor(opts: AgentDbClientOptions = {}) {
    this.redisUrl = opts.redisUrl ?? 'redis://127.0.0.1:6379';
    this.keys = keysFor(opts.prefix ?? 'agentdb');
    this.shardCount = opts.shardCount ?? 16;
    this.resultTtlS = opts.resultTtlS ?? 7 * 24 * 3600;
    this.redis = connectRedis(this.redisUrl, { name: 'agentdb-client' });
  }

  /**
   * Enqueues one tool call. With `wait` (the default) resolves with its envelope once it has
   * run; without, answers as soon as it is queued. Bad input answers at once with an
   * `ok: false` envelope and enqueues nothing.
   */
  async call(input: CallInput, opts: CallOptions = {}): Promise<Envelope | PendingAnswer> {
    const callId = input.callId ?? randomUUID();
    const planned = planCall({ ...input, callId }, this.shardCount);
    if (!planned.ok) {
      const f = planned.failure;
      return errorEnvelope(callId, f.tool, f.code, f.detail);
    }
    const { request, shard, tool } = planned.plan;
    const data: CallJobData = {
      callId,
      workspace: request.workspace,
      agent: request.agent,
      settings: request.settings,
      tool,
      arguments: request.arguments ?? {},
      enqueuedAt: Date.now(),
    };
    const wait = opts.wait ?? true;
    let outcome: Promise<Envelope> | undefined;
    if (wait) {
      await this.ensureReader();
      outcome = this.waitFor(callId);
    }
    const queue = this.queue(shard);
    await queue.add('call', data, this.jobOptions(callId));
    if (!outcome) return { ok: false, callId, tool, status: 'queued' };
    return this.awaitOutcome(callId, tool, queue, outcome, opts.timeoutMs ?? 30_000);
  }

  /** Closes every connection; calls still being awaited are left to finish without us. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    if (this.reader) await (await this.reader).stop();
    this.redis.disconnect();
  }

  private jobOptions(callId: string): JobsOptions {
    return {
      jobId: callId,
      // Retries only ever follow a fault (a dead worker, a lost Redis): agent errors complete.
      attempts: 3,
      backoff: { type: 'exponential', delay: 500 },
      removeOnComplete: { age: this.resultTtlS },
      removeOnFail: { age: this.resultTtlS },
    };
  }

  private queue(shard: number): Queue {
    let q = this.queues.get(shard);
    if (!q) {
      q = new Queue(this.keys.queueName(shard), { connection: this.redis, prefix: this.keys.bullPrefix });
      this.queues.set(shard, q);
    }
    return q;
  }

  private ensureReader(): Promise<EventReader> {
    this.reader ??= (async () => {
      // Start from the newest event that exists now, so no completion can slip between
      // enqueueing a call and the reader's first read.
      const from = await latestEventId(this.redis, this.keys.events);
      const reader = new EventReader(connectRedis(this.redisUrl, { blocking: true, name: 'agentdb-events' }), this.keys.events, from, (e) =>
        this.onEvent(e),
      );
      reader.start();
      return reader;
    })();
    return this.reader;
  }

  private onEvent(event: StreamedEvent): void {
    if (event.type !== 'call.completed') return;
    const waiting = this.waiters.get(event.callId);
    if (!waiting) return;
    if (event.envelope) return this.settle(event.callId, event.envelope);
    // Large envelopes travel by reference: fetch the job's return value.
    void this.fetchResult(event.callId).then((env) => env && this.settle(event.callId, env));
  }

  private waitFor(callId: string): Promise<Envelope> {
    return new Promise((resolve) => {
      const set = this.waiters.get(callId) ?? new Set<Waiter>();
      set.add(resolve);
      this.waiters.set(callId, set);
    });
  }

  private settle(callId: string, envelope: Envelope): void {
    const set = this.waiters.get(callId);
    this.waiters.delete(callId);
    for (const resolve of set ?? []) resolve(envelope);
  }

  /** The finished envelope of a call, looked up on every shard queue; undefined if not finished. */
  private async fetchResult(callId: string): Promise<Envelope | undefined> {
    for (let shard = 0; shard < this.shardCount; shard++) {
      const job = await Job.fromId<CallJobData, Envelope>(this.queue(shard), callId);
      if (job?.finishedOn) return job.returnvalue ?? failedEnvelope(callId, job.data.tool, job.failedReason);
    }
    return undefined;
  }

  /**
   * Waits for the completion event; checks the job every `timeoutMs` as a safety net. A call no
   * worker has picked up by then is withdrawn (removed, so it can never run later) and answers
   * NO_WORKER; a call already running is waited for.
   */
  private async awaitOutcome(callId: string, tool: string, queue: Queue, outcome: Promise<Envelope>, timeoutMs: number) {
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const tick = new Promise<'tick'>((r) => (timer = setTimeout(() => r('tick'), timeoutMs)));
      const first = await Promise.race([outcome, tick]);
      clearTimeout(timer);
      if (first !== 'tick') return first;
      const state = await queue.getJobState(callId);
      if (state === 'completed' || state === 'failed') {
        const env = await this.fetchResult(callId);
        if (env) {
          this.settle(callId, env);
          return env;
        }
      }
      if (state === 'waiting' || state === 'prioritized' || state === 'unknown') {
        const removed = state === 'unknown' ? 1 : await queue.remove(callId);
        if (removed === 1) {
          const env = errorEnvelope(callId, tool, 'NO_WORKER', `No worker took call ${callId} within ${timeoutMs} ms.`);
          this.settle(callId, env);
          return env;
        }
      }
    }
  }
}

function failedEnvelope(callId: string, tool: string, reason: string | undefined): Envelope {
  return errorEnvelope(callId, tool, 'INTERNAL', reason ? `The call failed: ${reason}` : 'The call failed.');
}
