// One file past 300 lines on purpose: AgentDbClient is the package's public API (its options and
// the enqueue that admits a call: plan, headroom, rates and budget (one script), call-id claim,
// add or join, in that order; a generated id's rates, budget and add in one script). Each step it calls lives in its own file in calls/; what is left here is the order.
import { randomUUID } from 'node:crypto';
import type { Tracer } from '@opentelemetry/api';
import type { Redis } from 'ioredis';
import type { DecideResult } from '../approvals/approval-service.ts';
import { DEFAULT_MAX_CALL_BYTES, type CallInput, type CallJobData } from '../contracts/call.ts';
import { callKey, callKeyOf } from '../contracts/call-identity.ts';
import { shardOf } from '../contracts/database-id.ts';
import { UNREGISTERED_PLAN } from '../contracts/settings.ts';
import { errorEnvelope, type Envelope } from '../contracts/envelope.ts';
import { planCall } from '../policy/call-plan.ts';
import { connectRedis, shownUrl } from '../redis/connection.ts';
import { EventFeed } from '../redis/event-feed.ts';
import { EventReader, latestEventId, type StreamedEvent } from '../redis/events.ts';
import { keysFor, type Keys } from '../redis/keys.ts';
import { RedisMemoryHeadroom } from '../redis/memory-headroom.ts';
import { ShardQueues } from '../redis/shard-queues.ts';
import { AgentRegistry, type RegisteredAgent } from '../registry/agents.ts';
import { WorkspaceRegistry } from '../registry/workspaces.ts';
import { awaiting, within, type AwaitingAnswer, type CallAnswer, type Decision, type FinishedAnswer, type PendingAnswer } from './call-answers.ts';
import { awaitCompletion } from './call-completion-wait.ts';
import { claimCallId, claimTtlS, type ClaimPlace } from './call-id-claim.ts';
import { CallLookup } from './call-lookup.ts';
import { checkClientOptions } from './client-options.ts';
import { ClientShardCount } from './client-shard-count.ts';
import { addOrJoin, callJobOptions } from './call-resend.ts';
import { jobAdd, type JobAdd } from './admitted-add.ts';
import { callResult, type ResultQuery } from './call-result.ts';
import { CallWaiters, WaitEnded, type WaitCounts } from './call-waiters.ts';
import { ClientApprovals } from './client-approvals.ts';
import { decideUnanswered, enqueueUnanswered, OutageAnswers, REDIS_ANSWER_MS, resultUnanswered, unavailable, Unanswered } from './outage-answers.ts';
import { TIMED_OUT, within as bounded } from '../redis/bounded-wait.ts';
import { CALL_POINTS, CallRateLimits, DEFAULT_RATE_LIMITS, LOOKUP_POINTS, type RateRefusal } from './call-rate-limits.ts';
import type { RateLimitSettings } from '../config.ts';
import { Metrics } from '../metrics.ts';
import { queueTelemetry, toolCallSpan, tracerIf, traceparentContext } from '../tracing.ts';
import { CALL_OVERHEAD_BYTES, ENVELOPE_RESERVE_BYTES, jsonBytes, jsonTextBytes } from './redis-bytes.ts';
import { WorkspaceRedisBudget, type Admission } from './workspace-redis-budget.ts';

/** Options of an {@link AgentDbClient}. */
export interface AgentDbClientOptions {
  /** Default `redis://127.0.0.1:6379`. */
  redisUrl?: string;
  /** The deployment's key prefix (`AGENTDB_PREFIX`), default `agentdb`. */
  prefix?: string;
  /**
   * The workers' `SHARD_COUNT`. Left out, the client reads the count the workers publish under
   * the prefix when they start (on its first call), or assumes 16 while none has started; given
   * one that differs from the published one, each call answers CONFIG_MISMATCH and sends nothing.
   */
  shardCount?: number;
  /** How long finished calls keep their result in Redis, in seconds (RESULT_TTL_HOURS; default 24 h). */
  resultTtlS?: number;
  /**
   * How long a parked call may wait for a person (`APPROVAL_TTL_MS`, default 24 h): with
   * `resultTtlS`, how long a caller's own call id stays taken (see {@link claimCallId}).
   */
  approvalTtlMs?: number;
  /**
   * The most a call's arguments may take as JSON (`MAX_CALL_BYTES`, default 1 MB); a larger
   * call answers CALL_TOO_LARGE and nothing is enqueued. Workers check it again.
   */
  maxCallBytes?: number;
  /**
   * Call rates per workspace and per key (RATE_LIMITS, RATE_LIMIT_*): by default the plans' rates
   * per minute (docs/operations.md "Rate limits"); `false` lets every call through. A call past
   * a budget answers RATE_LIMITED with `error.retryAfter` and enqueues nothing.
   */
  rateLimits?: RateLimitSettings | false;
  /** REDIS_BYTES_PER_WORKSPACE: what one workspace may hold in Redis; 0 (default): its plan's budget. */
  redisBytesPerWorkspace?: number;
  /** REDIS_MEMORY_HEADROOM_PERCENT (default 20): new calls are refused this close to Redis's maxmemory. */
  redisMemoryHeadroomPercent?: number;
  /**
   * Where the client counts the calls and lookups it refuses for a tenant bound
   * (`agentdb_quota_refusals_total{quota}`: `rate`, `redis`, `headroom`): a service's own
   * registry (`agentdb start` serves it at /metrics). Without it the client counts on one of its
   * own, {@link AgentDbClient.metrics}, which a runtime reads or serves as it likes.
   */
  metrics?: Metrics;
  /**
   * OpenTelemetry spans of each call (`execute_tool <tool>`, and BullMQ's `add` with the trace
   * carried in the job to the workers) on the tracer provider the process registered; default
   * off. Workers trace their side with TRACING=on.
   */
  tracing?: boolean;
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
  /**
   * Gives the wait up when it aborts: the call stops being listened for at once (the last wait
   * on a call takes its look at the job with it), and the promise rejects with the signal's
   * reason, as `fetch` does. The call itself goes on.
   */
  signal?: AbortSignal;
  /**
   * The caller's W3C trace context (`00-<trace id>-<span id>-<flags>`): with tracing on, the
   * call's spans continue that trace. Without it they continue the active span, if any.
   */
  traceparent?: string;
  /** The W3C `tracestate` going with {@link CallOptions.traceparent}. */
  tracestate?: string;
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
  private readonly shards: ClientShardCount;
  private readonly resultTtlS: number;
  private readonly maxCallBytes: number;
  private readonly redis: Redis;
  private readonly redisUrl: string;
  private readonly queues: ShardQueues;
  private readonly waiters = new CallWaiters();
  private readonly feeds = new Set<EventFeed>();
  private reader?: Promise<EventReader>;
  private readonly workspaces: WorkspaceRegistry;
  private readonly outage: OutageAnswers;
  private readonly approvals: ClientApprovals;
  private readonly lookup: CallLookup;
  private readonly claims: Omit<ClaimPlace, 'shardCount'>;
  private readonly rates?: CallRateLimits;
  private readonly approvalTtlMs: number;
  private readonly budget: WorkspaceRedisBudget;
  private readonly headroom: RedisMemoryHeadroom;
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
    this.redisUrl = opts.redisUrl ?? 'redis://127.0.0.1:6379';
    this.keys = keysFor(opts.prefix ?? 'agentdb');
    this.where = { prefix: opts.prefix ?? 'agentdb', redisUrl: shownUrl(this.redisUrl) };
    this.resultTtlS = opts.resultTtlS ?? 24 * 3600;
    this.approvalTtlMs = opts.approvalTtlMs ?? 24 * 3600 * 1000;
    this.maxCallBytes = opts.maxCallBytes ?? DEFAULT_MAX_CALL_BYTES;
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
    // Back after a drop: every waited call's job is looked at now, so one that Redis lost while
    // down (it came back empty) answers at once, not at its next look, `timeoutMs` later.
    let dropped = false;
    this.redis.on('close', () => {
      dropped = true;
    });
    this.redis.on('ready', () => {
      if (!dropped) return;
      dropped = false;
      this.waiters.lookNow();
    });
    this.approvals = new ClientApprovals(this.redis, this.keys, () => this.shards.current);
    this.lookup = new CallLookup(this.redis, this.keys, this.queues, () => this.shards.current, this.approvals);
    // A parked call may wait `approvalTtlMs` for a person: with `resultTtlS`, how long a caller's
    // own call id stays taken.
    const ttlS = claimTtlS(this.resultTtlS, this.approvalTtlMs);
    this.budget = new WorkspaceRedisBudget(this.redis, this.keys, opts.redisBytesPerWorkspace ?? 0);
    this.headroom = new RedisMemoryHeadroom(this.redis, opts.redisMemoryHeadroomPercent ?? 20);
    this.claims = { redis: this.redis, keys: this.keys, queues: this.queues, ttlS };
    const rates = opts.rateLimits ?? DEFAULT_RATE_LIMITS;
    if (rates) this.rates = new CallRateLimits(this.keys, rates);
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
    if (!this.tracer) return this.callAs(callId, input, opts);
    const parent = traceparentContext(opts.traceparent, opts.tracestate);
    return toolCallSpan(this.tracer, { tool: String(input.tool), callId }, parent, () => this.callAs(callId, input, opts));
  }

  private async callAs(callId: string, input: CallInput, opts: CallOptions): Promise<CallAnswer> {
    const { keyId, ...call } = input;
    // Planned now so bad input answers without Redis; its shard is taken again once the
    // service's count is known (enqueue).
    const planned = planCall({ ...call, callId }, this.shards.current, this.maxCallBytes);
    if (!planned.ok) {
      const f = planned.failure;
      return errorEnvelope(callId, f.tool, f.code, f.detail);
    }
    const { tool } = planned.plan;
    const sent: Sent = { enqueued: false, stall: new Unanswered(REDIS_ANSWER_MS, () => enqueueUnanswered(this.redisUrl)) };
    const giveUp = (why: string, mayStillRun: boolean) => {
      // Answered now: the work, still waiting on commands that ioredis keeps for a Redis that
      // comes back, must not go on to enqueue a call this answer says cannot run.
      sent.answered = true;
      // Its waits go: in a Redis that came back empty its completion never comes.
      this.waiters.drop(sent.completion, sent.parking);
      return unavailable(callId, tool, why, mayStillRun);
    };
    try {
      return await this.outage.answerOrUnavailable(
        async () => {
          // A Redis that is connected but answers nothing: the commands already sent may still
          // run when it wakes, so the call may still be queued then.
          const answer = await Promise.race([this.enqueue(input, keyId, callId, planned.plan, opts, sent), sent.stall.passed.then((why) => giveUp(why, true))]);
          // Nobody took it: perhaps the service now runs another SHARD_COUNT; read it again.
          if (!answer.ok && 'error' in answer && answer.error.code === 'NO_WORKER') this.shards.forget();
          return answer;
        },
        (why) => giveUp(why, sent.enqueued),
        opts.signal,
      );
    } finally {
      sent.stall.disarm();
    }
  }

  private async enqueue(
    input: CallInput,
    keyId: unknown,
    callId: string,
    { request, tool, databaseId }: Extract<ReturnType<typeof planCall>, { ok: true }>['plan'],
    opts: CallOptions,
    sent: Sent,
  ): Promise<CallAnswer> {
    const down = await this.outage.redisDown();
    if (down) return unavailable(callId, tool, down, false);
    // Armed once Redis is known up: one that is down has answered above, within its own bound.
    sent.stall.arm();
    const shards = await this.shards.resolve();
    if (!shards.ok) return errorEnvelope(callId, tool, 'CONFIG_MISMATCH', shards.detail);
    const shard = shardOf(databaseId, shards.count);
    // The workspace's registered plan sets the limits; a caller cannot name one.
    const plan = await this.workspaces.planOf(request.workspace);
    const ownKey = typeof keyId === 'string' && !request.member ? keyId : undefined;
    // Counted before anything is claimed or enqueued (with the budget below, in one script): a
    // refused call leaves nothing behind. A counter known spent refuses without asking Redis.
    const counters = this.rates
      ? this.rates.counters({ plan, workspace: request.workspace, agent: request.agent, ...(ownKey ? { keyId: ownKey } : {}) }, CALL_POINTS)
      : [];
    if (!Array.isArray(counters)) return this.refused('rate', rateLimited(callId, tool, request.workspace, counters));
    const data: CallJobData = {
      callId,
      workspace: request.workspace,
      agent: request.agent,
      settings: request.settings,
      ...(request.member ? { member: request.member } : {}),
      ...(request.introspect ? { introspect: true as const } : {}),
      ...(ownKey ? { keyId: ownKey } : {}),
      plan,
      tool,
      arguments: request.arguments ?? {},
      enqueuedAt: Date.now(),
      ...(input.callId !== undefined ? { ownId: true as const } : {}),
    };
    const key = callKeyOf(data);
    const full = await this.headroom.refusal();
    if (full) return this.refused('headroom', errorEnvelope(callId, tool, 'UNAVAILABLE', full));
    const wait = opts.wait ?? true;
    const timeoutMs = opts.timeoutMs ?? 30_000;
    // Counted now, for as long as the job may live: taken, parked and kept after it finishes.
    // The worker moves it nearer when the call completes, and gives back the room reserved for
    // its envelope (which it counts as written instead).
    const until = data.enqueuedAt + timeoutMs + this.approvalTtlMs + this.resultTtlS * 1000;
    const entries = (argsBytes: number) => [
      { callKey: key, kind: 'args' as const, bytes: argsBytes + CALL_OVERHEAD_BYTES, until },
      { callKey: key, kind: 'reserve' as const, bytes: ENVELOPE_RESERVE_BYTES, until },
    ];
    const refusal = (r: Admission) =>
      'rate' in r
        ? this.refused('rate', rateLimited(callId, tool, request.workspace, this.rates!.refused(r.rate, r.msLeft)))
        : this.refused('redis', errorEnvelope(callId, tool, 'QUOTA_EXCEEDED', r.over));
    const ownId = input.callId !== undefined;
    const queue = this.queues.of(shard);
    // A generated id is new by nature, so nothing needs asking between the admission and the add:
    // the job is added by the admission's own script, one round trip (issue 31). A caller's own id
    // is claimed in between, and BullMQ's traced add carries its span: those take the two steps.
    // So does a call of a workspace this client last saw holding its budget: the note alone
    // first, so that Redis is not sent the arguments of a call it will likely refuse.
    const admitting = !ownId && !this.tracer && !this.budget.likelyFull(data.workspace, data.plan ?? UNREGISTERED_PLAN);
    let add: JobAdd | undefined;
    if (admitting) {
      // Ready first, as BullMQ's own add is: the queue's settings go before its first job.
      await queue.waitUntilReady();
      add = jobAdd(queue, 'call', data, callJobOptions(key, this.resultTtlS));
    } else {
      const refused = await this.budget.admitCall(data.workspace, data.plan ?? UNREGISTERED_PLAN, entries(jsonBytes(data)), counters);
      if (refused) return refusal(refused);
    }
    if (ownId) {
      const conflict = await claimCallId({ ...this.claims, shardCount: shards.count }, key, { shard, database: databaseId, data });
      if (conflict) return errorEnvelope(callId, tool, 'IDEMPOTENCY_CONFLICT', conflict);
    }
    await this.ensureReader();
    const completion = (sent.completion = this.waiters.completion(key, opts.signal));
    const parking = (sent.parking = wait && !opts.onStatus ? undefined : this.waiters.parking(key, opts.signal));
    // Checked and marked in one turn, so the outage's answer says either "not sent" and it is
    // not, or "may still run" (review R28: a call answered mayStillRun false ran once Redis was back).
    if (sent.answered) {
      // The answer came while this work waited on Redis, before these waits were set: it dropped
      // none of them, so they go here (a stopped Redis woken left one behind for good).
      this.waiters.drop(completion, parking);
      return unavailable(callId, tool, 'answered UNAVAILABLE already', false);
    }
    sent.enqueued = true;
    if (add) {
      const refused = await this.budget.admitCall(
        data.workspace,
        data.plan ?? UNREGISTERED_PLAN,
        entries(jsonTextBytes(add.dataJson)),
        counters,
        Date.now(),
        add,
      );
      if (refused) {
        sent.enqueued = false;
        this.waiters.drop(completion, parking);
        return refusal(refused);
      }
    }
    const joined = add
      ? undefined
      : await addOrJoin(this.waiters, this.lookup, {
          queue,
          key,
          data,
          resultTtlS: this.resultTtlS,
          ownId,
          wait,
          completion,
          ...(parking ? { parking } : {}),
        });
    // Handed to Redis: what follows is the wait, bounded by timeoutMs (a call may run for long).
    sent.stall.disarm();
    if (joined) return joined;
    if (wait) {
      const onStatus = opts.onStatus;
      if (onStatus) {
        onStatus({ ok: false, callId, tool, status: 'queued' });
        parking!.then(
          (approval) => onStatus(awaiting(callId, tool, approval)),
          () => undefined,
        );
      }
      const answer = await awaitCompletion(this.waiters, this.lookup, { key, callId, tool, queue, completion, timeoutMs, withdraw: true });
      // Its wait is over, however it ended (answered without Redis, the call perhaps never parked).
      this.waiters.drop(parking);
      return answer;
    }

    const first = await within(Promise.race([completion, parking!.then((approval) => awaiting(callId, tool, approval))]), timeoutMs);
    this.waiters.drop(completion, parking);
    if (first) return first;
    // A Redis that does not answer leaves the call where it was last seen: queued.
    const where = await bounded(REDIS_ANSWER_MS, this.lookup.standing(key, queue));
    return (where !== TIMED_OUT && where) || { ok: false, callId, tool, status: 'queued' };
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
    // A Redis that is connected but answers nothing: bounded up to the wait, which its own
    // timeoutMs (and the bounded look after it) ends.
    const stall = new Unanswered(REDIS_ANSWER_MS, () => resultUnanswered(this.redisUrl, callId));
    try {
      return await this.outage.answerOrUnavailable(
        async () => {
          const down = await this.outage.redisDown();
          if (down) return unavailable(callId, '', down, true);
          stall.arm();
          const looked = async (): Promise<CallAnswer> => {
            const shards = await this.shards.resolve();
            if (!shards.ok) return errorEnvelope(callId, '', 'CONFIG_MISMATCH', shards.detail);
            if (!opts.followUp) {
              const limited = await this.chargeLookup(opts);
              if (limited) return this.refused('rate', rateLimited(callId, '', opts.workspace, limited));
            }
            const sources = {
              waiters: this.waiters,
              lookup: this.lookup,
              ensureReader: () => this.ensureReader(),
              waiting: () => stall.disarm(),
              gaveUp: stall.passed,
            };
            return callResult(sources, callId, opts);
          };
          return Promise.race([looked(), stall.passed.then((why) => unavailable(callId, '', why, true))]);
        },
        (why) => unavailable(callId, '', why, true),
        opts.signal,
      );
    } finally {
      stall.disarm();
    }
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
    // A Redis that is connected but answers nothing may have recorded the decision before it stopped.
    const stall = new Unanswered(REDIS_ANSWER_MS, () => decideUnanswered(this.redisUrl, approvalId));
    try {
      return await this.outage.answerOrUnavailable(
        async () => {
          const down = await this.outage.redisDown();
          if (down) return { ok: false, code: 'UNAVAILABLE', detail: down };
          stall.arm();
          const decided = async (): Promise<DecideResult> => {
            const shards = await this.shards.resolve();
            if (!shards.ok) return { ok: false, code: 'CONFIG_MISMATCH', detail: shards.detail };
            return this.approvals.decide(approvalId, d);
          };
          return Promise.race([decided(), stall.passed.then((detail): DecideResult => ({ ok: false, code: 'UNAVAILABLE', detail }))]);
        },
        (detail) => ({ ok: false, code: 'UNAVAILABLE', detail }),
      );
    } finally {
      stall.disarm();
    }
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
    if (this.reader) await (await this.reader.catch(() => undefined))?.stop();
    this.redis.disconnect();
  }

  /** Counts a refusal for `quota` and answers `answer`. */
  private refused<T>(quota: 'rate' | 'redis' | 'headroom', answer: T): T {
    this.metrics.refusals.inc({ quota });
    return answer;
  }

  private ensureReader(): Promise<EventReader> {
    this.reader ??= (async () => {
      // Start from the newest event that exists now, so no completion can slip between
      // enqueueing a call and the reader's first read.
      const from = await latestEventId(this.redis, this.keys.events);
      const conn = connectRedis(this.redisUrl, { blocking: true, name: 'agentdb-events' });
      // A completion of a call nobody here waits on (another client's) is skipped unparsed.
      const reader = new EventReader(
        conn,
        this.keys.events,
        from,
        (e) => this.waiters.onEvent(e, (id) => this.lookup.finished(id)),
        (c) => this.waiters.awaitsCompletion(callKey(c.workspace, c.agent, c.callId)),
      );
      reader.start();
      return reader;
    })();
    // A reader that could not start (Redis down) is tried again by the next call.
    this.reader.catch(() => (this.reader = undefined));
    return this.reader;
  }
}

export type { AwaitingAnswer, CallAnswer, Decision, FinishedAnswer, PendingAnswer } from './call-answers.ts';
export type { WaitCounts } from './call-waiters.ts';

/** RATE_LIMITED, naming the budget spent, with the seconds to wait in the error (HTTP's Retry-After). */
function rateLimited(callId: string, tool: string, workspace: string, r: RateRefusal): Envelope {
  const whose = r.of === 'workspace' ? `Workspace ${workspace}` : 'This key';
  const detail = `${whose} may make ${r.calls} calls per ${r.windowS} s (a lookup of a call counts a tenth of one); send it again in ${r.retryAfterS} s.`;
  const env = errorEnvelope(callId, tool, 'RATE_LIMITED', detail);
  return { ...env, error: { ...env.error, retryAfter: r.retryAfterS } };
}

/** How far a call got, for its UNAVAILABLE answer: handed to Redis, and the waits it set. */
interface Sent {
  enqueued: boolean;
  /** The bound on the enqueue, armed once Redis is known up and disarmed once the call is handed to it. */
  stall: Unanswered;
  /** The outage was answered: nothing more may be handed to Redis. */
  answered?: boolean;
  completion?: Promise<Envelope>;
  parking?: Promise<Record<string, unknown>>;
}
