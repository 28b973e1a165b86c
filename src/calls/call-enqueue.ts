import type { CallInput, CallJobData } from '../contracts/call.ts';
import { callKeyOf } from '../contracts/call-identity.ts';
import { shardOf } from '../contracts/database-id.ts';
import { errorEnvelope, type Envelope } from '../contracts/envelope.ts';
import { UNREGISTERED_PLAN } from '../contracts/settings.ts';
import { planCall } from '../policy/call-plan.ts';
import { TIMED_OUT, within as bounded } from '../redis/bounded-wait.ts';
import type { RedisMemoryHeadroom } from '../redis/memory-headroom.ts';
import type { ShardQueues } from '../redis/shard-queues.ts';
import type { Queue } from 'bullmq';
import type { WorkspaceRegistry } from '../registry/workspaces.ts';
import { jobAdd, JobAddTemplate, type JobAdd } from './admitted-add.ts';
import { awaiting, within, type CallAnswer } from './call-answers.ts';
import { awaitCompletion, watchJob } from './call-completion-wait.ts';
import { claimCallId, claimEntry, type ClaimPlace } from './call-id-claim.ts';
import type { CallLookup } from './call-lookup.ts';
import { CALL_POINTS, rateLimited, type CallRateLimits } from './call-rate-limits.ts';
import { addOrJoin, callJobOptions, resentOutcome, type CallToAdd } from './call-resend.ts';
import type { CallWaiters } from './call-waiters.ts';
import type { CallOptions } from './client-options.ts';
import type { ClientShardCount } from './client-shard-count.ts';
import { enqueueUnanswered, REDIS_ANSWER_MS, ownIdAnswer, unavailable, type OutageAnswers, type Unanswered } from './outage-answers.ts';
import { jsonBytes, jsonTextBytes } from './redis-bytes.ts';
import { budgetRefusal, callEntry } from './call-budget-entry.ts';
import type { BudgetEntry } from './call-budget-entry.ts';
import type { Admission, WorkspaceRedisBudget } from './workspace-redis-budget.ts';
import { placeAdded } from '../redis/fair-place-added.ts';

/** A tenant bound a refusal is counted under (`agentdb_quota_refusals_total{quota}`). */
export type RefusedQuota = 'rate' | 'redis' | 'headroom';

/** What {@link CallEnqueue} works with: the parts and settings of the `AgentDbClient` it serves. */
export interface EnqueueParts {
  redisUrl: string;
  maxCallBytes: number;
  resultTtlS: number;
  approvalTtlMs: number;
  /** Tracing is on: BullMQ's traced add carries the span, so the one-script admitted add is not used. */
  traced: boolean;
  outage: OutageAnswers;
  shards: ClientShardCount;
  workspaces: WorkspaceRegistry;
  rates?: CallRateLimits;
  headroom: RedisMemoryHeadroom;
  queues: ShardQueues;
  budget: WorkspaceRedisBudget;
  claims: Omit<ClaimPlace, 'shardCount'>;
  waiters: CallWaiters;
  lookup: CallLookup;
  /** Starts the client's events reader: undefined once it runs, else a promise of its start. */
  ensureReader: () => Promise<unknown> | undefined;
  /** Counts a refusal for `quota` and answers `answer`. */
  refused: <T>(quota: RefusedQuota, answer: T) => T;
  /** Notes a refusal by the call's plan as one before taking, and answers it (`UntakenRefusals.unplanned`). */
  unplanned: <T>(answer: T) => T;
}

/**
 * The enqueue that admits one call for `AgentDbClient.call`: plan, headroom, rates and budget
 * (one script), call-id claim, add or join, in that order (a generated id's rates, budget and add
 * in one script), then the wait; all of it bounded by an outage answer (UNAVAILABLE, saying
 * whether the call may still run).
 */
export class CallEnqueue {
  /** Each queue's template of a call's add (null: its options take BullMQ's own path). */
  private readonly templates = new WeakMap<Queue, JobAddTemplate | null>();

  constructor(private readonly deps: EnqueueParts) {}

  /** Admits and enqueues the call `callId` and answers per {@link CallOptions.wait}; never rejects but for `signal`. */
  async call(callId: string, input: CallInput, opts: CallOptions): Promise<CallAnswer> {
    // The key and its registration say who calls, not what: the request's schema has neither.
    const { keyId, agentSince: _since, ...call } = input;
    // Planned now so bad input answers without Redis; its shard is taken again once the
    // service's count is known (enqueue).
    const planned = planCall({ ...call, callId }, this.deps.shards.current, this.deps.maxCallBytes);
    if (!planned.ok) {
      const f = planned.failure;
      return this.deps.unplanned(errorEnvelope(callId, f.tool, f.code, f.detail));
    }
    const { tool } = planned.plan;
    const sent: Sent = { enqueued: false, stall: this.deps.outage.unanswered(() => enqueueUnanswered(this.deps.redisUrl)) };
    const giveUp = (why: string, mayStillRun: boolean) => {
      // Answered now: the work, still waiting on commands that ioredis keeps for a Redis that
      // comes back, must not go on to enqueue a call this answer says cannot run.
      sent.answered = true;
      // Its waits go: in a Redis that came back empty its completion never comes.
      this.deps.waiters.drop(sent.completion, sent.parking);
      return unavailable(callId, tool, why, mayStillRun);
    };
    try {
      return await this.deps.outage.answerOrUnavailable(
        async () => {
          // A Redis that is connected but answers nothing: the commands already sent may still
          // run when it wakes, so the call may still be queued then.
          const answer = await Promise.race([this.enqueue(input, keyId, callId, planned.plan, opts, sent), sent.stall.passed.then((why) => giveUp(why, true))]);
          // Nobody took it: perhaps the service now runs another SHARD_COUNT; read it again.
          if (!answer.ok && 'error' in answer && answer.error.code === 'NO_WORKER') this.deps.shards.forget();
          return answer;
        },
        // A caller's own id may have been sent before, by this client or another, and that send
        // may have reached Redis and run: "not sent" is true of this send only, never of the id
        // (review F4: 12 writes answered so, and given up, had committed). So an own id's
        // answer always says it may still run, and the resend under it learns which.
        (why) => giveUp(why, sent.enqueued || input.callId !== undefined),
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
    // Warm (Redis up, the shard count read, the plan and headroom fresh, the queue and reader
    // ready), every step below is a check of what is kept, with no await before the script: each
    // await of a settled promise still cost the caller a turn (issue 31). Cold, each asks Redis.
    const { outage, shards: count, workspaces, headroom } = this.deps;
    const down = outage.up ? undefined : await outage.redisDown();
    // Not sent; under a caller's own id an earlier send may have run all the same (see call()).
    if (down) return unavailable(callId, tool, down, input.callId !== undefined);
    // Armed once Redis is known up: one that is down has answered above, within its own bound.
    sent.stall.arm();
    const shards = count.known() ?? (await count.resolve());
    if (!shards.ok) return errorEnvelope(callId, tool, 'CONFIG_MISMATCH', shards.detail);
    const shard = shardOf(databaseId, shards.count);
    // The workspace's registered plan sets the limits; a caller cannot name one.
    const plan = workspaces.planKnown(request.workspace) ?? (await workspaces.planOf(request.workspace));
    const ownKey = typeof keyId === 'string' && !request.member ? keyId : undefined;
    // Counted before anything is claimed or enqueued (with the budget below, in one script): a
    // refused call leaves nothing behind. A counter known spent refuses without asking Redis.
    const counters = this.deps.rates
      ? this.deps.rates.counters({ plan, workspace: request.workspace, agent: request.agent, ...(ownKey ? { keyId: ownKey } : {}) }, CALL_POINTS)
      : [];
    if (!Array.isArray(counters)) return this.deps.refused('rate', rateLimited(callId, tool, request.workspace, counters));
    const data: CallJobData = {
      callId,
      workspace: request.workspace,
      agent: request.agent,
      settings: request.settings,
      ...(request.member ? { member: request.member } : {}),
      ...(request.introspect ? { introspect: true as const } : {}),
      ...(ownKey ? { keyId: ownKey } : {}),
      ...(ownKey && typeof input.agentSince === 'number' ? { agentSince: input.agentSince } : {}),
      plan,
      tool,
      arguments: request.arguments ?? {},
      enqueuedAt: Date.now(),
      ...(input.callId !== undefined ? { ownId: true as const } : {}),
    };
    const key = callKeyOf(data);
    const full = (headroom.known() ?? { refusal: await headroom.refusal() }).refusal;
    // Refused before it is sent; a caller's own id may have run before all the same (see call()).
    if (full) return this.deps.refused('headroom', ownIdAnswer(errorEnvelope(callId, tool, 'UNAVAILABLE', full), input.callId !== undefined));
    const wait = opts.wait ?? true;
    const timeoutMs = opts.timeoutMs ?? 30_000;
    // Counted now, for as long as the job may live: taken, parked and kept after it finishes.
    // The worker swaps it, when the call completes, for the call's `done` entry (its arguments and
    // the envelope as written, until nearer) and so gives back the room reserved for the envelope.
    const until = data.enqueuedAt + timeoutMs + this.deps.approvalTtlMs + this.deps.resultTtlS * 1000;
    // Measured where it is sent: the admitting path has the job's JSON made already (below).
    const entryOf = (dataBytes: number) => callEntry(key, dataBytes, until);
    // A caller's own id's claim outlives the call's entries (see claimEntry): counted as long.
    const claim = input.callId !== undefined ? [claimEntry(key, this.deps.claims.ttlS, data.enqueuedAt)] : [];
    const refusal = (r: Admission) =>
      'rate' in r
        ? this.deps.refused('rate', rateLimited(callId, tool, request.workspace, this.deps.rates!.refused(r.rate, r.msLeft)))
        : this.deps.refused('redis', budgetRefusal(errorEnvelope(callId, tool, 'QUOTA_EXCEEDED', r.over), r.retryAfterS));
    const ownId = input.callId !== undefined;
    // A call that stores nothing of its own (see entryIsOwn): its whole entry goes, at once.
    // Never the id's claim, which the first call under the id holds; one that fails leaves the
    // entry to its expiry: counted too long, the safe side.
    const letGo = (entry: BudgetEntry) => () => this.deps.budget.letGo(data.workspace, [entry]);
    const queue = this.deps.queues.of(shard);
    // A generated id is new by nature, so nothing needs asking between the admission and the add:
    // the job is added by the admission's own script, one round trip (issue 31). A caller's own id
    // is claimed in between, and BullMQ's traced add carries its span: those take the two steps.
    // So does a call of a workspace this client last saw holding its budget: the note alone
    // first, so that Redis is not sent the arguments of a call it will likely refuse.
    const admitting = !ownId && !this.deps.traced && !this.deps.budget.likelyFull(data.workspace, data.plan ?? UNREGISTERED_PLAN);
    let add: JobAdd | undefined;
    // The own-id path's entry, which its claim and a resend compare with the id's first call's.
    let entry: BudgetEntry | undefined;
    if (admitting) {
      // Ready first, as BullMQ's own add is: the queue's settings go before its first job.
      if (!this.deps.queues.ready(shard)) await queue.waitUntilReady();
      let template = this.templates.get(queue);
      if (template === undefined) this.templates.set(queue, (template = JobAddTemplate.of(queue, 'call', callJobOptions('', this.deps.resultTtlS)) ?? null));
      add = template ? template.add(data, key) : jobAdd(queue, 'call', data, callJobOptions(key, this.deps.resultTtlS));
    } else {
      entry = entryOf(jsonBytes(data));
      const refused = await this.deps.budget.admitCall(data.workspace, data.plan ?? UNREGISTERED_PLAN, [entry, ...claim], counters);
      if (refused) return (ownId && 'over' in refused && (await resentOutcome(this.deps.lookup, queue, key, data))) || refusal(refused);
    }
    if (ownId) {
      const conflict = await claimCallId({ ...this.deps.claims, shardCount: shards.count }, key, {
        shard,
        database: databaseId,
        data,
        entryBytes: entry!.bytes,
      });
      if (conflict?.entryIsOwn) await letGo(entry!)();
      if (conflict) return errorEnvelope(callId, tool, 'IDEMPOTENCY_CONFLICT', conflict.why);
    }
    const starting = this.deps.ensureReader();
    if (starting) await starting;
    let completion = (sent.completion = this.deps.waiters.completion(key, opts.signal));
    const parking = (sent.parking = wait && !opts.onStatus ? undefined : this.deps.waiters.parking(key, opts.signal));
    // Checked and marked in one turn, so the outage's answer says either "not sent" and it is
    // not, or "may still run" (review R28: a call answered mayStillRun false ran once Redis was back).
    if (sent.answered) {
      // The answer came while this work waited on Redis, before these waits were set: it dropped
      // none of them, so they go here (a stopped Redis woken left one behind for good).
      this.deps.waiters.drop(completion, parking);
      return unavailable(callId, tool, 'answered UNAVAILABLE already', false);
    }
    sent.enqueued = true;
    if (add) {
      const refused = await this.deps.budget.admitCall(
        data.workspace,
        data.plan ?? UNREGISTERED_PLAN,
        [entryOf(jsonTextBytes(add.dataJson))],
        counters,
        Date.now(),
        add,
      );
      if (refused) {
        sent.enqueued = false;
        this.deps.waiters.drop(completion, parking);
        return refusal(refused);
      }
    }
    const toAdd: CallToAdd | undefined = add
      ? undefined
      : {
          queue,
          key,
          data,
          resultTtlS: this.deps.resultTtlS,
          ownId,
          wait,
          completion,
          ...(opts.signal ? { signal: opts.signal } : {}),
          answered: () => sent.answered === true,
          ...(parking ? { parking } : {}),
          // Set on this path (no admitted add): the entry was counted on its own first.
          entryBytes: entry!.bytes,
          letGo: letGo(entry!),
          // In its workspace's turn once the queue is long, as the admitted add's jobs are.
          place: () => placeAdded(queue, key, this.deps.claims.keys.redisBudget(data.workspace).ledger),
        };
    const joined = toAdd && (await addOrJoin(this.deps.waiters, this.deps.lookup, toAdd));
    if (toAdd) completion = sent.completion = toAdd.completion; // anew if it put the job back to run
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
      const answer = await awaitCompletion(this.deps.waiters, this.deps.lookup, { key, callId, tool, queue, completion, timeoutMs, withdraw: true });
      // Its wait is over, however it ended (answered without Redis, the call perhaps never parked).
      this.deps.waiters.drop(parking);
      return answer;
    }

    // Looked at when the connection is back after a drop, as a waited call is: a job Redis lost
    // answers at once that it may have run, not "queued" at timeoutMs (HTTP_WAIT_MS for POST
    // /v1/calls and MCP), which the request's own lookup then answered NOT_FOUND. Its own
    // timed look comes after this wait's end, which looks anyway: never a second command then.
    watchJob(this.deps.waiters, this.deps.lookup, { key, callId, tool, queue }, timeoutMs + REDIS_ANSWER_MS);
    const first = await within(Promise.race([completion, parking!.then((approval) => awaiting(callId, tool, approval))]), timeoutMs);
    this.deps.waiters.drop(completion, parking);
    if (first) return first;
    // A Redis that does not answer leaves the call where it was last seen: queued.
    const where = await bounded(REDIS_ANSWER_MS, this.deps.lookup.standing(key, queue));
    return (where !== TIMED_OUT && where) || { ok: false, callId, tool, status: 'queued' };
  }
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
