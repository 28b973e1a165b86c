import { randomUUID } from 'node:crypto';
import type { Tracer } from '@opentelemetry/api';
import type { Surface } from '../contracts/agent-profile.ts';
import type { CallInput } from '../contracts/call.ts';
import { errorEnvelope } from '../contracts/envelope.ts';
import { AgentDbError, refusesTheRequest } from '../errors.ts';
import { translateDbCall } from '../policy/db-surface.ts';
import { callerOf, callInputFor, type KeyedCall, type Principal } from '../registry/principal.ts';
import { databaseId } from '../contracts/database-id.ts';
import { downloadPoints, rateRefusalDetail, type RateRefusal } from './call-rate-limits.ts';
import { jobLost } from './call-completion-wait.ts';
import type { AgentDbClient, CallAnswer } from './client.ts';
import { dbAnswer, type ApprovalRequiredAnswer, type TranslatedDbCall } from './db-answers.ts';

/** The bound each tenant refusal of the client stands for. */
const REFUSAL_QUOTA: Partial<Record<string, 'rate' | 'redis'>> = { RATE_LIMITED: 'rate', QUOTA_EXCEEDED: 'redis' };

/** How long a request may wait: `wait` false answers at once; true waits up to `maxWaitMs`. */
export interface KeyedWait {
  wait: boolean;
  maxWaitMs: number;
  /**
   * Aborts when the request's client has gone (an HTTP connection closed, an MCP cancel): its
   * wait stops listening at once, and the call's answer rejects with the signal's reason.
   */
  signal?: AbortSignal;
  /** The caller's W3C trace context (HTTP headers, MCP `_meta`): the call's spans continue it. */
  trace?: TraceContext;
}

/** A caller's W3C trace context, as `traceparent` and `tracestate` carry it. */
export interface TraceContext {
  traceparent?: string;
  tracestate?: string;
}

/** Why a bounded wait was given up short of the call's end: its bound passed, or the server stops. */
const BOUND_PASSED = new Error('the wait bound passed');

export type { ApprovalRequiredAnswer } from './db-answers.ts';

type DbSurface = Extract<Surface, { kind: 'db' }>;

/**
 * Tool calls made with a bearer key (HTTP `/v1/calls`, MCP): the key's principal becomes the
 * caller, so the call key, idempotency, approvals and results are the same ones the client
 * library uses, and only the key's own calls can be looked up. A request never waits longer
 * than `maxWaitMs`; past it, it answers where the call stands (queued, running, awaiting
 * approval) and the caller asks again by call id. An agent registered with the db surface
 * calls db_query, db_schema and db_exec, which run as the DATA_* tools they map onto.
 */
export class KeyedCalls {
  /** Ends each wait in progress early (see {@link stopWaiting}). */
  private readonly waits = new Set<AbortController>();
  /**
   * Set by {@link stopWaiting}: the server stops, and a request that would wait again (an MCP
   * `tasks/result`, which waits until its call ends) answers instead.
   */
  stopped = false;

  constructor(
    private readonly client: AgentDbClient,
    /**
     * Told of each call refused for a tenant bound, by which: `rate` (RATE_LIMITED) or `redis`
     * (QUOTA_EXCEEDED), for `agentdb_quota_refusals_total`. The client refuses them before any
     * worker sees the call, so the workers' call counts never had them.
     */
    private readonly onRefused?: (quota: 'rate' | 'redis') => void,
  ) {}

  /**
   * Answers every request still waiting, at once, with where its call stands, as if its wait
   * bound had passed: a stopping server closes only once its requests have answered, and a
   * request waiting on a person's decision held a SIGTERM for up to MCP_APPROVAL_WAIT_MS.
   */
  stopWaiting(): void {
    this.stopped = true;
    for (const wait of this.waits) wait.abort(BOUND_PASSED);
    this.waits.clear();
  }

  /**
   * Counts a lookup of a member `@<name>` of `workspace` (a tenth of a call) against its rate
   * limits, or `points` (an activity page's reading, `activityReadPoints`); answers the refusal
   * past one (see `AgentDbClient.chargeLookup`).
   */
  chargeMemberLookup(workspace: string, member: string, points?: number): Promise<RateRefusal | undefined> {
    return this.counted(this.client.chargeLookup({ workspace, agent: `@${member}` }, points));
  }

  /**
   * Counts a lookup by `principal` (a tenth of a call) against its key's and workspace's rate
   * limits, for a read that is not of one call (an MCP `tasks/list` page); the refusal past one.
   */
  chargeLookup(principal: Principal): Promise<RateRefusal | undefined> {
    return this.counted(this.client.chargeLookup(this.rateSubject(principal)));
  }

  /**
   * Counts one MCP task follow-up by `principal` (`tasks/get`, `tasks/result`, `tasks/cancel`) in
   * its own bucket, apart from its calls and lookups; the refusal past it.
   */
  chargeTaskPoll(principal: Principal): Promise<RateRefusal | undefined> {
    return this.counted(this.client.chargeOwn(this.rateSubject(principal), 'task-polls'));
  }

  /**
   * Counts one MCP request by `principal` that runs no call (`initialize`, `ping`, `tools/list`,
   * a notification: src/mcp/request-charge.ts) in its own bucket, apart from its calls, lookups
   * and task follow-ups; the refusal past it.
   */
  chargeMcpRequest(principal: Principal): Promise<RateRefusal | undefined> {
    return this.counted(this.client.chargeOwn(this.rateSubject(principal), 'mcp-requests'));
  }

  /**
   * Counts a download of an offloaded result by `principal` against its key's and workspace's
   * rates (`downloadPoints`: a lookup for `bytes` 0, else a call per MiB).
   * @throws AgentDbError RATE_LIMITED, with `retryAfter`, past one.
   */
  async chargeDownload(principal: Principal, bytes: number): Promise<void> {
    const limited = await this.counted(this.client.chargeLookup(this.rateSubject(principal), downloadPoints(bytes)));
    if (!limited) return;
    const whose = limited.of === 'workspace' ? `Workspace ${principal.workspace}` : 'This key';
    const what = bytes === 0 ? 'a download counts a tenth of one' : `a download counts a call per MiB: this one ${Math.floor(bytes / (1024 * 1024))}`;
    throw new AgentDbError('RATE_LIMITED', rateRefusalDetail(limited, whose, what, 'try again'), { retryAfter: limited.retryAfterS });
  }

  private rateSubject(principal: Principal): { workspace: string; agent: string; keyId?: string } {
    return { workspace: principal.workspace, agent: callerOf(principal), ...(principal.kind === 'agent' ? { keyId: principal.keyId } : {}) };
  }

  private async counted(refusal: Promise<RateRefusal | undefined>): Promise<RateRefusal | undefined> {
    const r = await refusal;
    if (r) this.onRefused?.('rate');
    return r;
  }

  /** The client's tracer, when tracing is on: adapters open their own spans on it (MCP's `tools/call`). */
  get tracer(): Tracer | undefined {
    return this.client.tracer;
  }

  /** Requests waiting now, each holding one bound timer (for tests and metrics). */
  waiting(): number {
    return this.waits.size;
  }

  /**
   * Whether `answer` (of {@link call}) refused the call before it was taken (a rate, the Redis
   * budget, Redis near full; its plan): no call ran under its id (see `AgentDbClient.refusedUntaken`).
   */
  untaken(answer: object): boolean {
    return this.client.refusedUntaken(answer);
  }

  /**
   * Whether `answer` (of {@link call} or {@link result}) refuses the request rather than answering
   * its call: the registry's rule (`refusesTheRequest`: a call id naming another call, Redis away,
   * any refusal that says when to send again), or the workspace's Redis budget refusing the call
   * before it was taken when it cannot say when room comes back (no `retryAfter`: nothing of the
   * workspace's is kept to expire first). That one was a 200 envelope on `/v1/calls`, a call's
   * outcome, where MCP gave it no task and every other bound's refusal was an HTTP error (session
   * 32, A3). It is answered as the registry has QUOTA_EXCEEDED: a 403, not sent again as it is.
   * The disk quota's QUOTA_EXCEEDED is the outcome of a call that ran: not this.
   */
  refusesTheRequest(answer: CallAnswer | ApprovalRequiredAnswer): boolean {
    if (answer.ok || !('error' in answer)) return false;
    return refusesTheRequest(answer.error) || (answer.error.code === 'QUOTA_EXCEEDED' && this.untaken(answer));
  }

  /**
   * The RATE_LIMITED answer to a call by `principal` whose key's or workspace's call rate this
   * process knows spent for the rest of its window (a refusal by Redis remembered), known from
   * the request's key alone, so a flood past the rate is refused before its body is read (T17):
   * the same code and message as {@link call}'s, with tool '' and a new call id. Undefined when
   * the rate may allow it: only Redis says more.
   */
  refusedByKnownRate(principal: Principal): CallAnswer | undefined {
    const answer = this.client.refusedByKnownRate(this.rateSubject(principal));
    if (answer) this.onRefused?.('rate');
    return answer;
  }

  /** Enqueues `call` as `principal` and answers per `opts`. */
  async call(principal: Principal, call: KeyedCall, opts: KeyedWait): Promise<CallAnswer | ApprovalRequiredAnswer> {
    const answer =
      principal.kind === 'agent' && principal.surface.kind === 'db'
        ? await this.dbCall(principal, principal.surface, call, opts)
        : await this.enqueue(callInputFor(principal, call), principal, opts);
    if (this.onRefused && !answer.ok && 'error' in answer) {
      const quota = REFUSAL_QUOTA[answer.error.code];
      // A QUOTA_EXCEEDED the worker answered is the disk quota's, which the worker counts as
      // such: only the client's own refusal before it took the call is the Redis budget's.
      if (quota === 'rate' || (quota === 'redis' && this.untaken(answer))) this.onRefused(quota);
    }
    return answer;
  }

  /**
   * The principal's own call `callId`: its envelope, or where it stands. `followUp`: a read
   * agentdb makes for the caller of a call already counted (its wait going on, an MCP task
   * looking at its call), not counted against the lookup rate limits.
   */
  async result(principal: Principal, callId: string, opts: KeyedWait & { followUp?: true }): Promise<CallAnswer> {
    const answer = await this.lookUp(principal, callId, opts);
    if (this.onRefused && !answer.ok && 'error' in answer && answer.error.code === 'RATE_LIMITED') this.onRefused('rate');
    return answer;
  }

  private async lookUp(principal: Principal, callId: string, opts: KeyedWait & { followUp?: true }): Promise<CallAnswer> {
    const memberSince = principal.since;
    const who = {
      workspace: principal.workspace,
      agent: callerOf(principal),
      ...(memberSince !== undefined ? { memberSince } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
      ...(principal.kind === 'agent' ? { keyId: principal.keyId } : {}),
      ...(opts.followUp ? { followUp: true as const } : {}),
    };
    if (!opts.wait) return this.client.result(callId, who);
    opts.signal?.throwIfAborted();
    // The wait is given up — and with it the client's listening, shared with other waits on the
    // call — when its bound passes, the server stops, or the request's client goes away.
    const wait = new AbortController();
    const giveUp = () => wait.abort(opts.signal?.reason);
    const timer = setTimeout(() => wait.abort(BOUND_PASSED), opts.maxWaitMs).unref();
    opts.signal?.addEventListener('abort', giveUp, { once: true });
    this.waits.add(wait);
    try {
      return await this.client.result(callId, { ...who, wait: true, signal: wait.signal });
    } catch (err) {
      if (wait.signal.reason !== BOUND_PASSED) throw err;
      // The same lookup, answered where the call stands now: counted once, above.
      return this.client.result(callId, { ...who, followUp: true });
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', giveUp);
      this.waits.delete(wait);
    }
  }

  private async enqueue(input: CallInput, principal: Principal, opts: KeyedWait): Promise<CallAnswer> {
    const deadline = Date.now() + opts.maxWaitMs;
    // The pick-up wait (until the call has run or been parked) is part of the caller's wait: left
    // at the client's 30 s, a POST with HTTP_WAIT_MS=2000 behind a busy executor answered after 32 s.
    const first = await this.client.call(input, { wait: false, timeoutMs: opts.maxWaitMs, ...(opts.signal ? { signal: opts.signal } : {}), ...opts.trace });
    if (!opts.wait || !('status' in first)) return first;
    const left = deadline - Date.now();
    // The call's own wait going on, counted as the call: not a lookup.
    const answer =
      left <= 0
        ? await this.lookUp(principal, first.callId, { wait: false, maxWaitMs: 0, followUp: true })
        : await this.lookUp(principal, first.callId, { ...opts, maxWaitMs: left, followUp: true });
    // This request handed the call to Redis: no job under its id now is a Redis that came back
    // empty, and the call may have run (review K1: a member's MCP write answered NOT_FOUND, "no
    // such call", had committed).
    if (!answer.ok && 'error' in answer && answer.error.code === 'NOT_FOUND') return jobLost(first.callId, first.tool);
    return answer;
  }

  private async dbCall(
    principal: Extract<Principal, { kind: 'agent' }>,
    surface: DbSurface,
    call: KeyedCall,
    opts: KeyedWait,
  ): Promise<CallAnswer | ApprovalRequiredAnswer> {
    const t = translateDbCall(surface, call.tool, call.arguments);
    if (!t.ok) return this.client.refuseUnplanned(errorEnvelope(call.callId ?? randomUUID(), call.tool, t.code, t.detail));
    const input: CallInput = {
      ...callInputFor(principal, { tool: t.tool, arguments: t.arguments, ...(call.callId !== undefined ? { callId: call.callId } : {}) }),
      ...(t.introspect ? { introspect: true } : {}),
    };
    const db = databaseId(principal.workspace, principal.agent);
    const statement = (call.arguments as { statement?: unknown }).statement;
    if (t.requireApproval) {
      // require-approval answers at once (db-capability.md); the parked call runs once approved.
      input.settings = { ...principal.settings, approval: 'write' };
      const first = await this.client.call(input, { wait: false, timeoutMs: opts.maxWaitMs, ...(opts.signal ? { signal: opts.signal } : {}), ...opts.trace });
      return this.asDb(first, t, db, statement);
    }
    return this.asDb(await this.enqueue(input, principal, opts), t, db, statement);
  }

  /** {@link dbAnswer}, still known as a refusal before taking where `answer` was one. */
  private asDb(answer: CallAnswer, t: TranslatedDbCall, db: string, statement: unknown): CallAnswer | ApprovalRequiredAnswer {
    const out = dbAnswer(answer, t, db, statement);
    this.client.carryUntaken(answer, out);
    return out;
  }
}
