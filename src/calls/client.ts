// AgentDbClient is the package's public API: its options are in client-options.ts, the enqueue
// that admits a call in call-enqueue.ts, and each step either calls lives in its own file in
// calls/; what is left here is the client's parts and their wiring.
import { randomUUID } from 'node:crypto';
import type { Tracer } from '@opentelemetry/api';
import type { Redis } from 'ioredis';
import type { DecideResult } from '../approvals/approval-service.ts';
import { DEFAULT_MAX_CALL_BYTES, type CallInput } from '../contracts/call.ts';
import { Metrics } from '../metrics.ts';
import { connectRedis, shownUrl } from '../redis/connection.ts';
import { EventFeed } from '../redis/event-feed.ts';
import { workspaceFeedScope } from './event-gap-replay.ts';
import type { FeedEvent } from '../redis/event-types.ts';
import { keysFor, type Keys } from '../redis/keys.ts';
import { RedisMemoryHeadroom } from '../redis/memory-headroom.ts';
import { ShardQueues } from '../redis/shard-queues.ts';
import { AgentRegistry, type RegisteredAgent } from '../registry/agents.ts';
import { MemberRegistry } from '../registry/members.ts';
import { WorkspaceRegistry } from '../registry/workspaces.ts';
import { queueTelemetry, toolCallSpan, tracerIf, traceparentContext } from '../tracing.ts';
import type { CallAnswer, Decision, FinishedAnswer } from './call-answers.ts';
import { CallEnqueue } from './call-enqueue.ts';
import { claimTtlS } from './call-id-claim.ts';
import { CallLookup } from './call-lookup.ts';
import { CallRateLimits, DEFAULT_RATE_LIMITS, LOOKUP_POINTS, type OwnBudget, rateLimited, type RateRefusal } from './call-rate-limits.ts';
import type { ResultQuery } from './call-result.ts';
import { CallWaiters, WaitEnded, type WaitCounts } from './call-waiters.ts';
import { ClientApprovals } from './client-approvals.ts';
import { ClientCallEvents } from './client-call-events.ts';
import { clientResult, type ClientResultParts } from './client-result.ts';
import { checkClientOptions, type AgentDbClientOptions, type CallOptions } from './client-options.ts';
import { ClientShardCount } from './client-shard-count.ts';
import { OutageAnswers } from './outage-answers.ts';
import { UntakenRefusals } from './untaken-refusals.ts';
import { WorkspaceRedisBudget } from './workspace-redis-budget.ts';

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
  private readonly shards: ClientShardCount;
  private readonly redis: Redis;
  private readonly redisUrl: string;
  private readonly queues: ShardQueues;
  private readonly waiters = new CallWaiters();
  private readonly feeds = new Set<EventFeed>();
  /** This client's refusals of calls before they were taken (see {@link refusedUntaken}). */
  private readonly untaken: UntakenRefusals;
  private readonly callEvents: ClientCallEvents;
  private readonly workspaces: WorkspaceRegistry;
  private readonly outage: OutageAnswers;
  private readonly approvals: ClientApprovals;
  private readonly lookup: CallLookup;
  private readonly rates?: CallRateLimits;
  private readonly enqueue: CallEnqueue;
  private readonly budget: WorkspaceRedisBudget;
  /** What {@link result} asks with (client-result.ts). */
  private readonly resultParts: ClientResultParts;
  private closed = false;
  /** agentdb's tracer when {@link AgentDbClientOptions.tracing} is on; adapters open their spans on it. */
  readonly tracer?: Tracer;
  /**
   * Where this client counts what it refuses for a tenant bound, before any worker sees it:
   * `metrics.refusals` (`agentdb_quota_refusals_total{quota}`), by `rate` (RATE_LIMITED),
   * `redis` (the workspace's Redis budget, QUOTA_EXCEEDED) and `headroom` (Redis near its
   * maxmemory, UNAVAILABLE). A library-only runtime reads it with
   * `await client.metrics.refusals.get()` or serves `await client.metrics.text()`.
   */
  readonly metrics: Metrics;
  /**
   * Where this client looks: its key prefix and its Redis URL with the password replaced. A
   * message saying something is missing names it, since a prefix or URL other than the server's
   * is the usual cause.
   */
  readonly where: { readonly prefix: string; readonly redisUrl: string };

  /** @throws AgentDbError INVALID_ARGUMENTS at once, naming each bad option (a URL that is not redis://, a prefix …). */
  constructor(opts: AgentDbClientOptions = {}) {
    checkClientOptions(opts);
    this.metrics = opts.metrics ?? new Metrics();
    this.untaken = new UntakenRefusals(this.metrics);
    this.redisUrl = opts.redisUrl ?? 'redis://127.0.0.1:6379';
    this.keys = keysFor(opts.prefix ?? 'agentdb');
    this.where = { prefix: opts.prefix ?? 'agentdb', redisUrl: shownUrl(this.redisUrl) };
    const resultTtlS = opts.resultTtlS ?? 24 * 3600;
    const approvalTtlMs = opts.approvalTtlMs ?? 24 * 3600 * 1000;
    this.redis = connectRedis(this.redisUrl, { name: 'agentdb-client' });
    // Every shard queue shares this one connection, each adding its own listeners. Infinity, not
    // 0: BullMQ adds 3 to a connection's limit for each queue on it, which turned 0 ("none")
    // into a limit of 3, and ioredis's reconnect went past it with a MaxListenersExceededWarning.
    this.redis.setMaxListeners(Infinity);
    this.tracer = tracerIf(opts.tracing);
    this.queues = new ShardQueues(this.redis, this.keys, this.tracer ? queueTelemetry() : undefined);
    this.workspaces = new WorkspaceRegistry(this.redis, this.keys);
    this.shards = new ClientShardCount(this.redis, this.keys, opts.shardCount);
    this.outage = new OutageAnswers(this.redis, this.redisUrl);
    this.approvals = new ClientApprovals(this.redis, this.keys, this.shards, this.outage, this.redisUrl);
    this.lookup = new CallLookup(this.redis, this.keys, this.queues, () => this.shards.current, this.approvals);
    this.callEvents = new ClientCallEvents(this.redis, this.redisUrl, this.keys, this.waiters, this.lookup);
    // A parked call may wait `approvalTtlMs` for a person: with `resultTtlS`, how long a caller's
    // own call id stays taken.
    const ttlS = claimTtlS(resultTtlS, approvalTtlMs);
    this.budget = new WorkspaceRedisBudget(this.redis, this.keys, opts.redisBytesPerWorkspace ?? 0);
    const rates = opts.rateLimits ?? DEFAULT_RATE_LIMITS;
    if (rates) this.rates = new CallRateLimits(this.keys, rates);
    this.enqueue = new CallEnqueue({
      redisUrl: this.redisUrl,
      maxCallBytes: opts.maxCallBytes ?? DEFAULT_MAX_CALL_BYTES,
      resultTtlS,
      approvalTtlMs,
      traced: this.tracer !== undefined,
      outage: this.outage,
      shards: this.shards,
      workspaces: this.workspaces,
      ...(this.rates ? { rates: this.rates } : {}),
      headroom: new RedisMemoryHeadroom(this.redis, opts.redisMemoryHeadroomPercent ?? 20),
      queues: this.queues,
      budget: this.budget,
      claims: { redis: this.redis, keys: this.keys, queues: this.queues, ttlS },
      waiters: this.waiters,
      lookup: this.lookup,
      ensureReader: () => this.callEvents.starting(),
      refused: (quota, answer) => this.untaken.refused(quota, answer),
      unplanned: (answer) => this.untaken.unplanned(answer),
    });
    this.resultParts = {
      redisUrl: this.redisUrl,
      outage: this.outage,
      shards: this.shards,
      waiters: this.waiters,
      lookup: this.lookup,
      ensureReader: () => this.callEvents.ensure(),
      chargeLookup: (who) => this.chargeLookup(who),
      refused: (quota, answer) => this.untaken.refused(quota, answer),
      registeredSince: async (workspace, agent) => (await this.registeredAgent(workspace, agent))?.createdAt,
      activeMemberSince: async (workspace, name) => (await new MemberRegistry(this.redis, this.keys).get(workspace, name))?.createdAt,
    };
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
   * way: it joins the call if it exists, and runs it once if it does not. The one rejection:
   * with `signal` aborted, the signal's reason.
   */
  call(input: CallInput, opts?: CallOptions & { wait?: true }): Promise<FinishedAnswer>;
  call(input: CallInput, opts: CallOptions): Promise<CallAnswer>;
  async call(input: CallInput, opts: CallOptions = {}): Promise<CallAnswer> {
    const callId = input.callId ?? randomUUID();
    if (!this.tracer) return this.enqueue.call(callId, input, opts);
    const parent = traceparentContext(opts.traceparent, opts.tracestate);
    return toolCallSpan(this.tracer, { tool: String(input.tool), callId }, parent, () => this.enqueue.call(callId, input, opts));
  }

  /**
   * A call's outcome by its caller and id: its envelope once finished; otherwise, with `wait`,
   * resolves when it finishes, and without, answers where it stands (queued, running, awaiting
   * approval). A call id belongs to its caller: another workspace's or agent's call of the same
   * id, like an unknown (or long expired) one, answers NOT_FOUND; a Redis that does not answer,
   * or one that dies while it waits, UNAVAILABLE (`mayStillRun: true`: the call may be queued
   * in a Redis that comes back; ask again then). Each lookup counts a tenth of a call against the
   * rate limits of its key (`keyId`; else its agent) and workspace; past one it answers
   * RATE_LIMITED with `error.retryAfter`. It never rejects, but for `signal` aborting a wait
   * (with the signal's reason; the call goes on).
   */
  result(callId: string, opts: ResultQuery & { wait: true }): Promise<FinishedAnswer>;
  result(callId: string, opts: ResultQuery): Promise<CallAnswer>;
  async result(callId: string, opts: ResultQuery): Promise<CallAnswer> {
    return clientResult(this.resultParts, callId, opts);
  }

  /** A call by `who` refused by a rate this process knows spent (no Redis asked, the call unread: tool '', a new id), as {@link call} answers; else undefined. */
  refusedByKnownRate(who: { workspace: string; agent: string; keyId?: string }): CallAnswer | undefined {
    const r = this.rates?.knownSpent(who, this.workspaces.planKnown(who.workspace));
    return r ? this.untaken.refused('rate', rateLimited(randomUUID(), '', who.workspace, r)) : undefined;
  }

  /**
   * Counts one lookup (a tenth of a call, {@link LOOKUP_POINTS}) against the rate limits of the
   * caller's key (`keyId`; else its agent, or `@<member>`) and workspace, as {@link result} does
   * for each look at a call: for other reads whose cost grows with the caller's asking (a page
   * of a database's activity; `points` more for a page that read much, `activityReadPoints`).
   * Answers the refusal when a budget is spent, else undefined.
   */
  async chargeLookup(who: { workspace: string; agent: string; keyId?: string }, points = LOOKUP_POINTS): Promise<RateRefusal | undefined> {
    if (!this.rates) return undefined;
    const plan = await this.workspaces.planOf(who.workspace);
    const counters = this.rates.counters({ plan, workspace: who.workspace, agent: who.agent, ...(who.keyId ? { keyId: who.keyId } : {}) }, points);
    if (!Array.isArray(counters)) return counters;
    const spent = await this.budget.countRates(who.workspace, counters);
    return spent ? this.rates.refused(spent.rate, spent.msLeft) : undefined;
  }

  /**
   * Counts one request of the caller's key (`keyId`; else its agent, or `@<member>`) in budget
   * `of`, a bucket of its own apart from its calls (`CallRateLimits.ownCounter`): an MCP task
   * follow-up (`tasks/get`, `tasks/result`, `tasks/cancel`) or an MCP request that runs no call
   * (`initialize`, `ping`, `tools/list`…). The refusal when spent, else undefined.
   */
  async chargeOwn(who: { workspace: string; agent: string; keyId?: string }, of: OwnBudget): Promise<RateRefusal | undefined> {
    if (!this.rates) return undefined;
    const plan = await this.workspaces.planOf(who.workspace);
    const counters = this.rates.ownCounter({ plan, workspace: who.workspace, agent: who.agent, ...(who.keyId ? { keyId: who.keyId } : {}) }, of);
    if (!Array.isArray(counters)) return counters;
    const spent = await this.budget.countRates(who.workspace, counters);
    return spent ? this.rates.refused(spent.rate, spent.msLeft) : undefined;
  }

  /**
   * The registered agent `agent` of `workspace` (`agentdb agents set`): its settings and tool
   * surface, or undefined when it is not registered. The framework adapters build their tools
   * from it, so a runtime offers a model exactly what the registration allows.
   */
  async registeredAgent(workspace: string, agent: string): Promise<RegisteredAgent | undefined> {
    return new AgentRegistry(this.redis, this.keys).get(workspace, agent);
  }

  /** The waits this client holds now: calls listened for, waits on them, looks at their jobs scheduled. */
  waitCounts(): WaitCounts {
    return this.waiters.counts();
  }

  /**
   * Decides an approval: as the member whose `key` this is (the proof HTTP asks for too), or,
   * with `operator: true`, as the member named `by` on the word of this trusted runtime. The
   * approval records which of the two it was.
   */
  async decide(approvalId: string, d: Decision): Promise<DecideResult> {
    return this.approvals.decide(approvalId, d);
  }

  /**
   * Follows agentdb's events (`approval.requested`, `approval.decided`, `call.completed`) from
   * `from`: a stream id to resume after, `0` for the oldest kept, or (default) `$` for new ones.
   * Each event carries its `id`, to resume from. Events after `from` trimmed before the feed read
   * them are said (`events.missed`); with `workspace`, only its events, and its approval events of
   * that stretch given back first (`workspaceFeedScope`).
   */
  events(opts: { from?: string; workspace?: string } = {}): AsyncIterableIterator<FeedEvent> & { close(): Promise<void> } {
    const scope = opts.workspace !== undefined ? workspaceFeedScope(this.redis, this.keys, opts.workspace) : undefined;
    const conn = connectRedis(this.redisUrl, { blocking: true, name: 'agentdb-feed' });
    const feed = new EventFeed(conn, this.redis, this.keys.events, opts.from ?? '$', () => this.feeds.delete(feed), scope);
    this.feeds.add(feed);
    return feed;
  }

  /**
   * Closes every connection. Calls still being awaited go on without us; their waits answer
   * UNAVAILABLE (`mayStillRun: true`: ask for the outcome again with another client).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.waiters.close(new WaitEnded('The client was closed before the call finished; ask for its outcome again by its call id.'));
    this.outage.stop();
    await Promise.all([...this.feeds].map((f) => f.close()));
    await this.approvals.close();
    await this.queues.close();
    await this.callEvents.stop();
    this.redis.disconnect();
  }

  /**
   * Whether `answer` is this client's refusal of a call before it was taken (a rate, the Redis
   * budget, Redis near full; its plan, or its surface's rules: {@link refuseUnplanned}): nothing
   * ran under its id, whatever its code. A QUOTA_EXCEEDED may
   * also be the outcome of a call that ran (a disk quota), and a resend's join window treats the
   * two differently (`PendingCallJoins.settle`).
   */
  refusedUntaken(answer: object): boolean {
    return this.untaken.has(answer);
  }

  /** Notes `answer`, a surface's refusal of a call before it reached this client (the db_* rules), as a refusal before taking. */
  refuseUnplanned<T extends object>(answer: T): T {
    return this.untaken.unplanned(answer);
  }

  /** `derived`, an answer an adapter made of this client's `answer`, is a refusal before taking where `answer` was one (see {@link refusedUntaken}). */
  carryUntaken(answer: object, derived: object): void {
    this.untaken.carry(answer, derived);
  }
}

export type { AwaitingAnswer, CallAnswer, Decision, FinishedAnswer, PendingAnswer } from './call-answers.ts';
export type { WaitCounts } from './call-waiters.ts';
