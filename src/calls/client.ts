import { randomUUID } from 'node:crypto';
import { Job, type Queue, type JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { DEFAULT_MAX_CALL_BYTES, type CallInput, type CallJobData } from '../contracts/call.ts';
import { errorEnvelope, type Envelope, type ErrorEnvelope } from '../contracts/envelope.ts';
import { ApprovalService, summary, type DecideResult } from '../approvals/approval-service.ts';
import { approvalIdFor } from '../approvals/approval.ts';
import { callFingerprint, callKey, callKeyOf, payloadDifferences } from '../contracts/call-identity.ts';
import { claimTtlS, parseClaim, RECORDED_TOOLS, type CallIdClaim } from './call-id-claim.ts';
import { MemberRegistry } from '../registry/members.ts';
import { WorkspaceRegistry } from '../registry/workspaces.ts';
import { connectRedis, redisAnswers } from '../redis/connection.ts';
import { planCall } from '../policy/call-plan.ts';
import { CallWaiters } from './call-waiters.ts';
import {
  awaiting,
  finishedEnvelope,
  within,
  type AwaitingAnswer,
  type CallAnswer,
  type Decision,
  type FinishedAnswer,
  type PendingAnswer,
} from './call-answers.ts';
import { EventReader, latestEventId, type StreamedEvent } from '../redis/events.ts';
import { EventFeed } from '../redis/event-feed.ts';
import { keysFor, type Keys } from '../redis/keys.ts';
import { RedisOutage } from '../redis/redis-outage.ts';
import { ShardQueues } from '../redis/shard-queues.ts';

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
  /**
   * How long a parked call may wait for a person (`APPROVAL_TTL_MS`, default 24 h): with
   * `resultTtlS`, how long a caller's own call id stays taken (see `claimCallId`).
   */
  approvalTtlMs?: number;
  /**
   * The most a call's arguments may take as JSON (`MAX_CALL_BYTES`, default 1 MB); a larger
   * call answers CALL_TOO_LARGE and nothing is enqueued. Workers check it again.
   */
  maxCallBytes?: number;
}

/** Options of one call. */
export interface CallOptions {
  /**
   * `true` (default): resolve when the call has finished — run, rejected or expired — however
   * long a person takes. `false`: answer as soon as it has run or been parked for a person.
   */
  wait?: boolean;
  /** How long a worker may take to pick the call up before it is withdrawn (default 30 s). */
  timeoutMs?: number;
  /**
   * Told, for a waited call, each step it takes short of finishing, so a caller can say what
   * it waits for: `queued` once it is enqueued (with its call id), `awaiting_approval` (with the
   * approval) when it is parked for a person. The call goes on waiting either way.
   */
  onStatus?: (status: PendingAnswer | AwaitingAnswer) => void;
}

/**
 * The agent runtime's way into agentdb: enqueues tool calls straight onto the shard queues,
 * awaits their envelopes, fetches results later, decides approvals and follows events. One
 * event-stream reader serves every call the client waits on; it resumes where it left off
 * after a reconnect, so a wait survives one.
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
  private readonly approvalTtlMs: number;
  private readonly maxCallBytes: number;
  private readonly redis: Redis;
  private readonly redisUrl: string;
  private readonly queues: ShardQueues;
  private readonly waiters = new CallWaiters();
  private readonly feeds = new Set<EventFeed>();
  private reader?: Promise<EventReader>;
  private approvals?: ApprovalService;
  private answering?: Promise<void>;
  private readonly workspaces: WorkspaceRegistry;
  private readonly outage: RedisOutage;
  private closed = false;

  constructor(opts: AgentDbClientOptions = {}) {
    this.redisUrl = opts.redisUrl ?? 'redis://127.0.0.1:6379';
    this.keys = keysFor(opts.prefix ?? 'agentdb');
    this.shardCount = opts.shardCount ?? 16;
    this.resultTtlS = opts.resultTtlS ?? 7 * 24 * 3600;
    this.approvalTtlMs = opts.approvalTtlMs ?? 24 * 3600 * 1000;
    this.maxCallBytes = opts.maxCallBytes ?? DEFAULT_MAX_CALL_BYTES;
    this.redis = connectRedis(this.redisUrl, { name: 'agentdb-client' });
    // Every shard queue shares this one connection, each adding its own listeners. Infinity, not
    // 0: BullMQ adds 3 to a connection's limit for each queue on it, which turned 0 ("none")
    // into a limit of 3, and ioredis's reconnect went past it with a MaxListenersExceededWarning.
    this.redis.setMaxListeners(Infinity);
    this.queues = new ShardQueues(this.redis, this.keys);
    this.workspaces = new WorkspaceRegistry(this.redis, this.keys);
    this.outage = new RedisOutage(this.redis, this.redisUrl);
    // The next outage is asked about afresh: a verdict kept from the last one would answer a
    // call during a blip UNAVAILABLE at once, with a stale reason.
    this.redis.on('ready', () => (this.answering = undefined));
  }

  /**
   * Enqueues one tool call and answers per {@link CallOptions.wait}. Bad input answers at
   * once with an `ok: false` envelope and enqueues nothing; so does a Redis that does not
   * answer (UNAVAILABLE, within a few seconds). A call no worker picks up within `timeoutMs`
   * is withdrawn (NO_WORKER) when waited for, and left queued otherwise. A waited call answers
   * only with its envelope.
   *
   * It never rejects: when Redis dies part way, the call answers UNAVAILABLE within a few
   * seconds, with `mayStillRun` saying whether it had been handed to Redis (it may then run
   * when Redis returns with its data). Sending it again under the same `callId` is safe either
   * way: it joins the call if it exists, and runs it once if it does not.
   */
  call(input: CallInput, opts?: CallOptions & { wait?: true }): Promise<FinishedAnswer>;
  call(input: CallInput, opts: CallOptions): Promise<CallAnswer>;
  async call(input: CallInput, opts: CallOptions = {}): Promise<CallAnswer> {
    const callId = input.callId ?? randomUUID();
    const { keyId, ...call } = input;
    const planned = planCall({ ...call, callId }, this.shardCount, this.maxCallBytes);
    if (!planned.ok) {
      const f = planned.failure;
      return errorEnvelope(callId, f.tool, f.code, f.detail);
    }
    const { tool } = planned.plan;
    const sent: Sent = { enqueued: false };
    return this.answerOrUnavailable(
      () => this.enqueue(input, keyId, callId, planned.plan, opts, sent),
      (why) => {
        // Its waits go: in a Redis that came back empty its completion never comes.
        this.waiters.drop(sent.completion, sent.parking);
        return unavailable(callId, tool, why, sent.enqueued);
      },
    );
  }

  private async enqueue(
    input: CallInput,
    keyId: unknown,
    callId: string,
    { request, shard, tool, databaseId }: Extract<ReturnType<typeof planCall>, { ok: true }>['plan'],
    opts: CallOptions,
    sent: Sent,
  ): Promise<CallAnswer> {
    const down = await this.redisDown();
    if (down) return unavailable(callId, tool, down, false);
    const data: CallJobData = {
      callId,
      workspace: request.workspace,
      agent: request.agent,
      settings: request.settings,
      ...(request.member ? { member: request.member } : {}),
      ...(request.introspect ? { introspect: true as const } : {}),
      ...(typeof keyId === 'string' && !request.member ? { keyId } : {}),
      // The workspace's registered plan sets the limits; a caller cannot name one.
      plan: await this.workspaces.planOf(request.workspace),
      tool,
      arguments: request.arguments ?? {},
      enqueuedAt: Date.now(),
    };
    const key = callKeyOf(data);
    if (input.callId !== undefined) {
      const conflict = await this.claimCallId(key, { shard, database: databaseId, data });
      if (conflict) return errorEnvelope(callId, tool, 'IDEMPOTENCY_CONFLICT', conflict);
    }
    const wait = opts.wait ?? true;
    const timeoutMs = opts.timeoutMs ?? 30_000;
    await this.ensureReader();
    const completion = (sent.completion = this.waiters.completion(key));
    const parking = (sent.parking = wait && !opts.onStatus ? undefined : this.waiters.parking(key));
    const queue = this.queues.of(shard);
    sent.enqueued = true;
    // A caller's own call id may have been used before: read what the id holds alongside the
    // add (same connection, so no extra round trip's wait). A generated id is new by nature.
    let [, earlier] = await Promise.all([
      queue.add('call', data, this.jobOptions(key)),
      input.callId === undefined ? undefined : Job.fromId<CallJobData, Envelope>(queue, key),
    ]);
    if (
      earlier &&
      earlier.data.enqueuedAt !== data.enqueuedAt &&
      earlier.finishedOn &&
      ranNothingUnderItsId(earlier) &&
      payloadDifferences(earlier.data, data).length
    ) {
      // The job under this id is another call's, refused because the id was not its to use (it
      // found the database's record holding it): it ran nothing and holds the id for nobody.
      // This call has the claim (checked above): it takes the job's place.
      await queue.remove(key);
      [, earlier] = await Promise.all([queue.add('call', data, this.jobOptions(key)), Job.fromId<CallJobData, Envelope>(queue, key)]);
    }
    if (earlier && earlier.data.enqueuedAt !== data.enqueuedAt) {
      const differs = payloadDifferences(earlier.data, data);
      if (differs.length) {
        this.waiters.drop(completion, parking);
        return errorEnvelope(
          callId,
          tool,
          'IDEMPOTENCY_CONFLICT',
          `Call id ${JSON.stringify(callId)} was already used for another call (it differs in ${differs.join(', ')}).`,
        );
      }
      // The same call again: it answers the first one's outcome, finished or not — unless its
      // job failed. That is a fault's end (a worker that could not start a database process,
      // after its retries), not the call's outcome, and must not stay the id's answer: the call
      // runs again (a write that did commit is replayed by its record, not run twice).
      if (earlier.finishedOn && isFailed(earlier)) await runAgain(earlier);
      else if (earlier.finishedOn) {
        const env = finishedEnvelope(earlier);
        this.waiters.complete(key, env);
        return env;
      }
      if (!wait) {
        // Parked already (or just finished): that is the answer. Queued or running, it waits
        // below like the first call, on waits of its own, which were listening before it looked.
        const where = await this.lookup(key, queue);
        if (where && (!('status' in where) || where.status === 'awaiting_approval')) {
          this.waiters.drop(completion, parking);
          return where;
        }
      }
    }
    if (wait) {
      const onStatus = opts.onStatus;
      if (onStatus) {
        onStatus({ ok: false, callId, tool, status: 'queued' });
        void parking!.then((approval) => onStatus(awaiting(callId, tool, approval)));
      }
      return this.awaitCompletion(key, callId, tool, queue, completion, timeoutMs, true);
    }

    const first = await within(Promise.race([completion, parking!.then((approval) => awaiting(callId, tool, approval))]), timeoutMs);
    this.waiters.drop(completion, parking);
    return first ?? (await this.lookup(key, queue)) ?? { ok: false, callId, tool, status: 'queued' };
  }

  /**
   * A call's outcome by its caller and id: its envelope once finished; otherwise, with `wait`,
   * resolves when it finishes, and without, answers where it stands (queued, running, awaiting
   * approval). A call id belongs to its caller: another workspace's or agent's call of the same
   * id, like an unknown (or long expired) one, answers NOT_FOUND; a Redis that does not answer,
   * or one that dies while it waits, UNAVAILABLE (`mayStillRun: true`: the call may be queued
   * in a Redis that comes back; ask again then). It never rejects.
   */
  result(callId: string, opts: { workspace: string; agent: string; wait: true; timeoutMs?: number }): Promise<FinishedAnswer>;
  result(callId: string, opts: { workspace: string; agent: string; wait?: boolean; timeoutMs?: number }): Promise<CallAnswer>;
  async result(callId: string, opts: { workspace: string; agent: string; wait?: boolean; timeoutMs?: number }): Promise<CallAnswer> {
    return this.answerOrUnavailable(
      () => this.lookUp(callId, opts),
      (why) => unavailable(callId, '', why, true),
    );
  }

  private async lookUp(callId: string, opts: { workspace: string; agent: string; wait?: boolean; timeoutMs?: number }): Promise<CallAnswer> {
    const down = await this.redisDown();
    if (down) return unavailable(callId, '', down, true);
    const key = callKey(opts.workspace, opts.agent, callId);
    // Listen before looking, so a completion between the look and the wait is not missed.
    let completion: Promise<Envelope> | undefined;
    if (opts.wait) {
      await this.ensureReader();
      completion = this.waiters.completion(key);
    }
    const found = await this.findJob(key);
    if (!found) {
      // Only this lookup's own wait ends: a call of that id being sent now still waits for its end.
      this.waiters.drop(completion);
      return errorEnvelope(
        callId,
        '',
        'NOT_FOUND',
        `There is no call ${JSON.stringify(callId)} of ${opts.workspace}/${opts.agent} (or its result has expired).`,
      );
    }
    const { job, queue } = found;
    if (job.finishedOn) {
      const env = finishedEnvelope(job);
      if (completion) this.waiters.complete(key, env);
      return env;
    }
    if (!completion) return (await this.lookup(key, queue)) ?? { ok: false, callId, tool: job.data.tool, status: 'queued' };
    return this.awaitCompletion(key, callId, job.data.tool, queue, completion, opts.timeoutMs ?? 30_000, false);
  }

  /**
   * Decides an approval: as the member whose `key` this is (the proof HTTP asks for too), or,
   * with `operator: true`, as the member named `by` on the word of this trusted runtime. The
   * approval records which of the two it was.
   */
  async decide(approvalId: string, d: Decision): Promise<DecideResult> {
    return this.answerOrUnavailable(
      () => this.decideNow(approvalId, d),
      (detail) => ({ ok: false, code: 'UNAVAILABLE', detail }),
    );
  }

  private async decideNow(approvalId: string, d: Decision): Promise<DecideResult> {
    const down = await this.redisDown();
    if (down) return { ok: false, code: 'UNAVAILABLE', detail: down };
    const input = { decision: d.decision, ...(d.reason !== undefined ? { reason: d.reason } : {}) };
    if ('key' in d) return this.approvalsFor().decideWithKey(approvalId, d.key, input);
    if (d.operator !== true) return { ok: false, code: 'INVALID_ARGUMENTS', detail: 'Deciding by name takes operator: true; a member decides with their key.' };
    return this.approvalsFor().decideAsOperator(approvalId, { ...input, by: d.by });
  }

  /**
   * Follows agentdb's events (`approval.requested`, `approval.decided`, `call.completed`) from
   * `from`: a stream id to resume after, `0` for the oldest kept, or (default) `$` for new ones.
   * Each event carries its `id`, to resume from after a restart.
   */
  events(opts: { from?: string } = {}): AsyncIterableIterator<StreamedEvent> & { close(): Promise<void> } {
    const feed = new EventFeed(connectRedis(this.redisUrl, { blocking: true, name: 'agentdb-feed' }), this.redis, this.keys.events, opts.from ?? '$', () =>
      this.feeds.delete(feed),
    );
    this.feeds.add(feed);
    return feed;
  }

  /** Closes every connection; calls still being awaited are left to finish without us. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.outage.stop();
    await Promise.all([...this.feeds].map((f) => f.close()));
    await this.approvals?.close();
    await this.queues.close();
    if (this.reader) await (await this.reader.catch(() => undefined))?.stop();
    this.redis.disconnect();
  }

  /**
   * `work`'s answer, or `down`'s once Redis has gone for a few seconds (see {@link RedisOutage})
   * or `work` fails: a runtime awaiting a call without try/catch must get an answer it can
   * read, never a driver error (ioredis's `MaxRetriesPerRequestError` crashed one). Whatever
   * `work` does later is ignored.
   */
  private async answerOrUnavailable<T>(work: () => Promise<T>, down: (why: string) => T): Promise<T> {
    let stop = (): void => {};
    const lost = new Promise<T>((resolve) => (stop = this.outage.onLost((why) => resolve(down(why)))));
    try {
      return await Promise.race([work(), lost]);
    } catch (err) {
      return down(`Redis did not answer: ${(err as Error).message}`);
    } finally {
      stop();
    }
  }

  /**
   * Undefined when Redis answers; otherwise what is wrong, for an UNAVAILABLE answer. A
   * connection to a Redis that is down retries forever and BullMQ waits for it without a word,
   * so this is asked first. Until the connection is back, later callers get the same answer at
   * once instead of waiting again (a batch must not wait a few seconds per call).
   */
  private async redisDown(): Promise<string | undefined> {
    if (this.redis.status === 'ready') return undefined;
    this.answering ??= redisAnswers(this.redis, this.redisUrl);
    try {
      await this.answering;
      return undefined;
    } catch (err) {
      return (err as { detail?: string }).detail ?? (err as Error).message;
    } finally {
      // Read again: the await above may have seen the connection come up.
      if (isReady(this.redis)) this.answering = undefined;
    }
  }

  /**
   * Takes a caller's own call id for this call, or says why it is another call's: what differs
   * from the call the id was first used for. The id's first call is recorded with its call key
   * (shard, database, {@link callFingerprint}) before anything is enqueued, and set only if
   * absent, so of two different calls sent at once under one id exactly one is taken. A job is
   * deduplicated by BullMQ only within its own shard's queue: without this record the same id
   * with another scope (another database, so another shard) ran as a second call. The same call
   * again finds its own fingerprint and goes on to answer the first call's outcome.
   */
  private async claimCallId(key: string, mine: { shard: number; database: string; data: CallJobData }): Promise<string | undefined> {
    const fingerprint = callFingerprint({ ...mine.data, database: mine.database });
    const claim: CallIdClaim = { shard: mine.shard, database: mine.database, fingerprint };
    const at = this.keys.callIdClaim(key);
    // SET NX, then GET when it was taken (not SET NX GET, which needs Redis 7): the second round
    // trip is paid only by a call id sent again. A claim gone in between (expired) is taken anew.
    for (let tries = 0; tries < 2; tries++) {
      if ((await this.redis.set(at, JSON.stringify(claim), 'EX', this.claimTtlS(), 'NX')) === 'OK') return undefined;
      const held = parseClaim(await this.redis.get(at));
      if (!held) continue;
      if (held.fingerprint === fingerprint) return undefined;
      // Held for the call a database's record holds (see `CallIdClaim.recorded`): a write or
      // drop into that database goes on, and its worker replays it or refuses it by the record.
      if (held.recorded && held.database === mine.database && RECORDED_TOOLS.has(mine.data.tool)) return undefined;
      const callId = JSON.stringify(mine.data.callId);
      if (held.recorded) {
        return `Call id ${callId} already ran a write or drop in database ${held.database} (its exactly-once record there holds it); nothing ran. Send that call again under the id for its outcome.`;
      }
      const differs: string[] = [];
      if (held.database !== mine.database) differs.push(`the database (${held.database}, now ${mine.database})`);
      const earlier = held.shard < this.shardCount ? await Job.fromId<CallJobData, Envelope>(this.queues.of(held.shard), key) : undefined;
      if (earlier) differs.push(...payloadDifferences(earlier.data, mine.data));
      // A first call withdrawn (NO_WORKER) or past its result's expiry keeps its id taken, but
      // has no outcome left to point at.
      const first = earlier ? 'the id answers the first call' : 'the first call under it has no outcome kept';
      return differs.length
        ? `Call id ${callId} was already used for another call (it differs in ${differs.join(', ')}); nothing ran, and ${first}.`
        : `Call id ${callId} was already used for another call; nothing ran, and ${first}.`;
    }
    return undefined;
  }

  /** How long a call id's claim lives (see {@link claimTtlS}). */
  private claimTtlS(): number {
    return claimTtlS(this.resultTtlS, this.approvalTtlMs);
  }

  private jobOptions(key: string): JobsOptions {
    return {
      jobId: key,
      // Retries only ever follow a fault (a dead worker, a lost Redis): agent errors complete.
      attempts: 3,
      backoff: { type: 'exponential', delay: 500 },
      removeOnComplete: { age: this.resultTtlS },
      removeOnFail: { age: this.resultTtlS },
    };
  }

  private ensureReader(): Promise<EventReader> {
    this.reader ??= (async () => {
      // Start from the newest event that exists now, so no completion can slip between
      // enqueueing a call and the reader's first read.
      const from = await latestEventId(this.redis, this.keys.events);
      const conn = connectRedis(this.redisUrl, { blocking: true, name: 'agentdb-events' });
      const reader = new EventReader(conn, this.keys.events, from, (e) => this.waiters.onEvent(e, (id) => this.fetchResult(id)));
      reader.start();
      return reader;
    })();
    // A reader that could not start (Redis down) is tried again by the next call.
    this.reader.catch(() => (this.reader = undefined));
    return this.reader;
  }

  private async findJob(key: string): Promise<{ job: Job<CallJobData, Envelope>; queue: Queue } | undefined> {
    // A caller's own call id records the shard of the call it was first used for.
    const claimed = parseClaim(await this.redis.get(this.keys.callIdClaim(key)));
    if (claimed && claimed.shard < this.shardCount) {
      const queue = this.queues.of(claimed.shard);
      const job = await Job.fromId<CallJobData, Envelope>(queue, key);
      if (job) return { job, queue };
    }
    // Otherwise (a generated id, a call made before ids were recorded) the call's key does not
    // name its shard (its database does); a lookup by id is rare enough to ask every queue.
    for (let shard = 0; shard < this.shardCount; shard++) {
      const queue = this.queues.of(shard);
      const job = await Job.fromId<CallJobData, Envelope>(queue, key);
      if (job) return { job, queue };
    }
    return undefined;
  }

  private async fetchResult(key: string): Promise<Envelope | undefined> {
    const found = await this.findJob(key);
    return found?.job.finishedOn ? finishedEnvelope(found.job) : undefined;
  }

  /** Where an unfinished call stands now, or its envelope if it just finished. */
  private async lookup(key: string, queue: Queue): Promise<CallAnswer | undefined> {
    const job = await Job.fromId<CallJobData, Envelope>(queue, key);
    if (!job) return undefined;
    if (job.finishedOn) return finishedEnvelope(job);
    const { callId, tool } = job.data;
    const state = await job.getState();
    if (state === 'delayed') {
      // Its approval is the one derived from its key; a job's own data cannot name another.
      const approval = await this.approvalsFor().get(approvalIdFor(key));
      if (approval?.callKey === key) return awaiting(callId, tool, summary(approval));
    }
    return { ok: false, callId, tool, status: state === 'active' ? 'running' : 'queued' };
  }

  private approvalsFor(): ApprovalService {
    this.approvals ??= new ApprovalService({
      redis: this.redis,
      prefix: this.keys.bullPrefix,
      shardCount: this.shardCount,
      members: new MemberRegistry(this.redis, this.keys),
    });
    return this.approvals;
  }

  /**
   * Waits for the completion event; checks the job every `timeoutMs` as a safety net. With
   * `withdraw`, a call no worker has picked up by then is removed (so it can never run later)
   * and answers NO_WORKER. A running or parked call is waited for, however long it takes.
   */
  private async awaitCompletion(
    key: string,
    callId: string,
    tool: string,
    queue: Queue,
    completion: Promise<Envelope>,
    timeoutMs: number,
    withdraw: boolean,
  ): Promise<Envelope> {
    for (;;) {
      const first = await within(completion, timeoutMs);
      if (first !== undefined) return first;
      const state = await queue.getJobState(key);
      if (state === 'completed' || state === 'failed') {
        const env = await this.fetchResult(key);
        if (env) {
          this.waiters.complete(key, env);
          return env;
        }
      }
      if (withdraw && (state === 'waiting' || state === 'prioritized' || state === 'unknown')) {
        // A worker that has started the call and put it back (its agent was over its share of
        // the shard) did take it: waiting again for a moment is no sign of a missing worker.
        if (state !== 'unknown' && ((await Job.fromId(queue, key))?.attemptsStarted ?? 0) > 0) continue;
        const removed = state === 'unknown' ? 1 : await queue.remove(key);
        if (removed === 1) {
          const env = errorEnvelope(callId, tool, 'NO_WORKER', `No worker took call ${callId} within ${timeoutMs} ms.`);
          this.waiters.complete(key, env);
          return env;
        }
      }
    }
  }
}

export type { AwaitingAnswer, CallAnswer, Decision, FinishedAnswer, PendingAnswer } from './call-answers.ts';

/** How far a call got, for its UNAVAILABLE answer: handed to Redis, and the waits it set. */
interface Sent {
  enqueued: boolean;
  completion?: Promise<Envelope>;
  parking?: Promise<Record<string, unknown>>;
}

/** A job that failed (threw after its retries) rather than completed with an envelope. */
function isFailed(job: Job<CallJobData, Envelope>): boolean {
  return job.returnvalue == null && !!job.failedReason;
}

/** Puts a failed job back to run, with its retries anew. */
async function runAgain(job: Job<CallJobData, Envelope>): Promise<void> {
  try {
    await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
  } catch {
    // No longer failed: another re-send put it back first (or it was removed); the wait that
    // follows finds out which.
  }
}

/**
 * A finished job that answered IDEMPOTENCY_CONFLICT: its call ran nothing (a worker answers that
 * only for a call whose id its database's record, or an approval, holds for another statement).
 */
function ranNothingUnderItsId(job: Job<CallJobData, Envelope>): boolean {
  const env = job.returnvalue as Envelope | null | undefined;
  return !!env && env.ok === false && env.error.code === 'IDEMPOTENCY_CONFLICT';
}

/**
 * UNAVAILABLE, saying whether the call may still run: once it has been handed to Redis, a Redis
 * that returns with its data runs it, so the caller sends it again under the same call id
 * (which joins it, or runs it once) rather than under a new one.
 */
function unavailable(callId: string, tool: string, why: string, mayStillRun: boolean): ErrorEnvelope {
  return { ...errorEnvelope(callId, tool, 'UNAVAILABLE', why), mayStillRun };
}

function isReady(redis: Redis): boolean {
  return redis.status === 'ready';
}
