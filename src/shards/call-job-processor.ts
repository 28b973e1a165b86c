import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { ApprovalStore } from '../approvals/approval-store.ts';
import type { OffloadedResults } from '../blobs/offloaded-results.ts';
import { failedCallEnvelope, stalledTwice } from '../calls/call-answers.ts';
import { type ReleaseDeps, settleLostRun } from '../calls/approved-release.ts';
import { CallCompletion, type Metering, type Rider } from '../calls/call-completion.ts';
import { claimTtlS, yieldClaim, yieldToRecord } from '../calls/call-id-claim.ts';
import type { CallIdLedger } from '../calls/call-id-ledger.ts';
import { CallParking } from '../calls/call-parking.ts';
import { runCall, type RunDeps, type RunOutcome } from '../calls/call-runner.ts';
import { callEntry } from '../calls/call-budget-entry.ts';
import { CALL_OVERHEAD_BYTES, jsonBytes, jsonTextBytes, sizeClassBytes } from '../calls/redis-bytes.ts';
import { WorkspaceRedisBudget } from '../calls/workspace-redis-budget.ts';
import type { Config } from '../config.ts';
import type { CallJobData } from '../contracts/call.ts';
import { callerSinceOf, callFingerprint, callKeyOf } from '../contracts/call-identity.ts';
import { errorEnvelope, type Envelope } from '../contracts/envelope.ts';
import { SHARD_OP_PREFIX } from '../contracts/shard-op.ts';
import type { ExecutorPool } from '../executor/executor-pool.ts';
import type { WorkspaceQuota } from '../history/workspace-quota.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { TOOL_TIERS } from '../contracts/tools.ts';
import { completedEvent, type CompletedEvent } from '../redis/events.ts';
import type { Keys } from '../redis/keys.ts';
import { executorSpan, runCallSpan } from '../tracing.ts';
import { approvedToSettle, stalledExecutor } from '../calls/lost-run-replay.ts';
import { dataJsonOf, stalledOutOf } from './shard-worker.ts';
import type { Tracer } from '@opentelemetry/api';

/** What a {@link CallJobProcessor} runs calls with: its worker's Redis, executor pool and stores. */
export interface CallJobProcessorOptions {
  config: Config;
  logger: Logger;
  redis: Redis;
  keys: Keys;
  executor: ExecutorPool;
  results: OffloadedResults;
  /** Where callers' own call ids are taken on disk, beside their Redis claims. */
  callIds?: CallIdLedger;
  /** A write that would create a database is checked against it (see `RunDeps.quota`). */
  quota?: WorkspaceQuota;
  /** Counts each call's outcome and time for `/metrics`. */
  metrics?: Metrics;
  /** With tracing on (TRACING=on): a span per call's run, its executor requests and its approval wait. */
  tracer?: Tracer;
}

/**
 * A shard worker's calls, one job each: runs the call (parking it for a person when it must
 * wait for one), then announces its envelope and meters it, in an order a waiting caller can
 * rely on. Its worker tells it when BullMQ has finished or failed a job.
 */
export class CallJobProcessor {
  private readonly completion: CallCompletion;
  private readonly parking: CallParking;
  private readonly budget: WorkspaceRedisBudget;
  /** Completions of large results, held until BullMQ has stored them (see `process`). */
  private readonly announceOnceFinished = new Map<string, () => void>();

  /** What settling an approved call's lost run needs (`settleLostRun`). */
  private readonly releaseDeps: ReleaseDeps;

  /** The executor the calls run on: the pool, each request in a span when tracing is on. */
  private readonly executor: RunDeps['executor'];
  /** What every call runs with: the same for each, so made once, not per call. */
  private readonly deps: RunDeps;

  constructor(private readonly opts: CallJobProcessorOptions) {
    const { config, redis, keys, tracer } = opts;
    this.executor = tracer ? { run: (req) => executorSpan(tracer, req.op, () => opts.executor.run(req)) } : opts.executor;
    this.deps = {
      config,
      executor: this.executor,
      results: opts.results,
      ...(opts.callIds ? { callIds: opts.callIds } : {}),
      ...(opts.quota ? { quota: opts.quota } : {}),
    };
    this.budget = new WorkspaceRedisBudget(redis, keys);
    this.completion = new CallCompletion(redis, keys, this.budget);
    this.releaseDeps = { store: new ApprovalStore(redis, keys), executor: this.executor, config, logger: opts.logger };
    this.parking = new CallParking({
      store: this.releaseDeps.store,
      redis,
      keys,
      approvalTtlMs: config.approvalTtlMs,
      executor: this.executor,
      config,
      ...(opts.quota ? { quota: opts.quota } : {}),
      logger: opts.logger,
      ...(tracer ? { tracer } : {}),
    });
  }

  /**
   * Runs a call's job on `shard` and answers its envelope (BullMQ stores it as the job's result).
   * Not async: an async function returning `run`'s promise adopted it two microtasks later.
   */
  process(job: Job<CallJobData>, token: string, shard: number): Promise<Envelope> {
    const { tracer } = this.opts;
    if (!tracer) return this.run(job, token, shard);
    return runCallSpan(tracer, { tool: String(job.data.tool), callId: String(job.data.callId), shard }, () => this.run(job, token, shard));
  }

  private async run(job: Job<CallJobData>, token: string, shard: number): Promise<Envelope> {
    // Made only when something is logged: on the hot path nothing is, at the default level.
    const log = () => this.opts.logger.child({ callId: job.id, shard });
    const started = Date.now();
    // A job BullMQ would have failed for stalling twice: a write answered from its record, a read run again.
    const stalled = stalledOutOf(job);
    const deps = stalled === undefined ? this.deps : { ...this.deps, executor: stalledExecutor(this.executor, job.data.tool, stalled) };
    const { data } = job;
    // The text the job's data was read from: the client's `JSON.stringify` of it (`dataJsonOf`),
    // so neither its size nor its arguments' is measured by serialising the data again.
    const text = dataJsonOf(job);
    const textBytes = text === undefined ? undefined : Buffer.byteLength(text);
    // Measured as the client counted it (a call refused at parking has its arguments dropped).
    const measure = () => (textBytes === undefined ? jsonBytes(data) : sizeClassBytes(textBytes)) + CALL_OVERHEAD_BYTES;
    let argsBytes: number;
    let outcome: RunOutcome;
    let parked = false;
    if (job.id !== callKeyOf(data)) {
      // Clients name a job after its caller's key; a job that names another call was not
      // enqueued by one, and must not stand in for that call's result or approval.
      argsBytes = measure();
      outcome = { envelope: errorEnvelope(String(data.callId), String(data.tool), 'INTERNAL', 'The job id does not name its call.'), meter: undefined };
    } else {
      const running = runCall(data, shard, deps, undefined, textBytes);
      // Once the statement is on its way to the executor (sent in runCall's synchronous part),
      // not before: serialising the job's data no longer delays it (issue 31).
      argsBytes = measure();
      const result = await running;
      parked = 'park' in result;
      if (parked && stalled !== undefined) await approvedToSettle(this.releaseDeps.store, job, stalled);
      outcome = 'park' in result ? await this.parking.handle(job, token, result, (approved) => runCall(data, shard, deps, approved)) : result;
    }
    const { envelope, meter } = outcome;
    if (outcome.asOf) this.opts.metrics?.asOfReads.inc({ moment: outcome.asOf });
    if (outcome.heldByLedger) {
      // Before the answer, as below: the id's claim in Redis (this call's, taken anew once Redis
      // came back empty) becomes the first call's, so that call's re-send goes through to its
      // outcome, and every other call under the id is refused by the client at once.
      const { config } = this.opts;
      const { held, from } = outcome.heldByLedger;
      await yieldClaim(this.opts.redis, this.opts.keys, job.id!, from, held, claimTtlS(config.resultTtlS, config.approvalTtlMs));
    }
    if (outcome.heldByRecord) {
      // Before the answer: once the caller hears it, a re-send of the recorded call must find
      // the id free for it (a claim kept by this call answered it "nothing ran").
      const { config } = this.opts;
      const fingerprint = callFingerprint({ ...data, database: outcome.heldByRecord.database });
      await yieldToRecord(this.opts.redis, this.opts.keys, job.id!, fingerprint, outcome.heldByRecord, claimTtlS(config.resultTtlS, config.approvalTtlMs));
    }
    const event = completedEvent(envelope, data.workspace, data.agent, callerSinceOf(data));
    // Only parking changes a job's data (a call refused there has its arguments dropped): any
    // other call keeps what was measured above, not serialised again to be measured again.
    // Metered once per job, whichever run meters first, when a run may meter what another run of
    // the same job meters too: a write's replay (see `RunOutcome.meterOnce`), a call metered ahead
    // of its store (below), and any run after the job's first, which may have metered so.
    const announcedFirst = event.inline && envelope.ok;
    const once = outcome.meterOnce || !announcedFirst || job.attemptsStarted > 1 ? `${job.queueQualifiedName}:${job.id}` : undefined;
    const metering = meter === undefined ? undefined : { workspace: data.workspace, agent: data.agent, credits: meter, at: started, ...(once ? { once } : {}) };
    if (announcedFirst) {
      // Not awaited: the event and BullMQ's own completion go out back to back on this one
      // connection, so the caller hears of the result a round trip sooner. Nothing is less
      // safe for it: the event carries the envelope, and a Redis failure here fails the job's
      // completion as well, so the call is retried (and replayed: the same ok). Alone in its
      // turn (a sequential caller's), it goes in the very script of BullMQ's completion, first.
      this.announce(envelope, event, metering, log, job.id);
    } else {
      // An event without its envelope sends the caller to the job for it, so it may only leave
      // once BullMQ has stored the result: announced from the worker's `completed` event. (Sent
      // first, a caller found the job unfinished and waited for its safety-net check: ~30 s.)
      // A failure waits for it too: BullMQ stores it only while this run holds the job's lock.
      // A run whose lock had lapsed (a child stopped past its deadline on a loaded host, review
      // R2) announced STATEMENT_TIMEOUT while the job's second run committed the write.
      // Its metering goes now, ahead of BullMQ's store on this connection: metered only in the
      // announce, a failure (STATEMENT_TIMEOUT, RESOURCE_LIMIT) or a large result whose worker
      // died between the store and the announce went free, and nothing ran its job again (review
      // F2). Marked on the job (`once`), so a later run of a job whose store failed meters nothing.
      if (metering && once)
        this.completion.meter(envelope.tool, { ...metering, once }).catch((err) => log().error({ err: String(err) }, 'could not meter a call'));
      this.announceOnceFinished.set(job.id!, () => this.announce(envelope, event, undefined, log));
    }
    // After the announce is queued, in this same turn: the completion's flush, the first to run,
    // sends this note and then the event in one script (`NOTED_COMPLETE_LUA`); noted before the
    // announce, the note went out alone in a microtask of its own, one more script in Redis.
    this.count(job, argsBytes, parked ? jsonBytes(job.data) + CALL_OVERHEAD_BYTES : argsBytes, jsonTextBytes(event.envelopeJson), log);
    // Counted once the completion has gone: its flush is the first microtask of this turn (queued
    // by the announce above), and this the next one, still before BullMQ hears of the answer.
    const seconds = (Date.now() - started) / 1000;
    queueMicrotask(() => this.countMetrics(envelope, seconds));
    if (this.opts.logger.isLevelEnabled('debug')) {
      log().debug({ tool: envelope.tool, ok: envelope.ok, code: envelope.ok ? undefined : envelope.error.code, ms: Date.now() - started }, 'call done');
    }
    return envelope;
  }

  /** Counts a finished call for `/metrics`: its tool, outcome and time. */
  private countMetrics(envelope: Envelope, seconds: number): void {
    const { metrics } = this.opts;
    if (!metrics) return;
    // A job's tool is whatever its data says: a name outside the contract is one label, not one each.
    const tool = Object.hasOwn(TOOL_TIERS, envelope.tool) ? envelope.tool : 'other';
    const outcome = envelope.ok ? 'ok' : envelope.error.code;
    metrics.calls.inc({ tool, outcome });
    metrics.callSeconds.observe({ tool }, seconds);
    if (outcome === 'STORAGE_FULL' || outcome === 'HISTORY_QUOTA') metrics.captureFailures.inc({ code: outcome });
  }

  /** BullMQ has stored a job's result: a completion held for it may go out now. */
  completed(jobId: string): void {
    // Held only for a call whose event waits for its store (a large result, a failure): most
    // calls announce at once, and this runs for every job BullMQ completes.
    if (this.announceOnceFinished.size === 0) return;
    const announce = this.announceOnceFinished.get(jobId);
    this.announceOnceFinished.delete(jobId);
    announce?.();
  }

  /**
   * A job threw: it has hit a fault, not an agent error; once its retries are spent the caller
   * of a call (a shard op's caller waits on its job) must still hear the outcome.
   */
  failed(job: Job | undefined, err: Error, shard: number): void {
    if (job) this.announceOnceFinished.delete(job.id!);
    // A job failed by its stalled check is failed for good (BullMQ's UnrecoverableError, whatever
    // its attempts left): without this its call ended with no `call.completed` (session 34, D2).
    const final = job && (job.attemptsMade >= (job.opts.attempts ?? 1) || stalledTwice(err.message));
    if (!job || !final || job.name.startsWith(SHARD_OP_PREFIX)) return;
    const { logger } = this.opts;
    logger.error({ shard, callId: job.id, err: String(err) }, 'call failed after its retries');
    const envelope = failedCallEnvelope(job.data, err.message);
    const event = completedEvent(envelope, job.data.workspace, job.data.agent, callerSinceOf(job.data));
    // An approved call's approval is settled from its database before the event goes out, so a
    // runtime or person reading it on `call.completed` sees whether it ran (session 34, D2).
    const settled = stalledTwice(err.message)
      ? settleLostRun(this.releaseDeps, job).catch((e) => logger.error({ callId: job.id, err: String(e) }, 'could not settle a lost approved run'))
      : Promise.resolve();
    void settled
      .then(() => this.completion.complete(envelope, event))
      .catch((e) => logger.error({ callId: job.id, err: String(e) }, 'could not announce a failed call'));
  }

  /**
   * Counts the envelope BullMQ is about to keep against the workspace's Redis budget, with the
   * call's arguments, until the job goes; the client's `call` entry (the arguments, counted for as
   * long as the job could live, and the room reserved for this envelope) goes in the same note.
   * Not awaited: sent on this connection ahead of the completion, in its script (with the other
   * notes of its workspace finished in the same turn), so whoever hears of the call hears of it
   * after the count.
   */
  private count(job: Job<CallJobData>, argsBytes: number, kept: number, envelopeBytes: number, log: () => Logger): void {
    const now = Date.now();
    // Until the scheduler's trim after RESULT_TTL_HOURS has removed the job and its event.
    const { resultTtlS, resultTrimEveryS } = this.opts.config;
    const until = now + (resultTtlS + resultTrimEveryS) * 1000;
    const callKey = job.id!;
    this.budget.noteSoon(
      job.data.workspace,
      [
        // The client's entry, as it counted it (`callEntry`, from the data's bytes: `argsBytes`
        // less the job's overhead): gone now (its time has come), its bytes given back.
        callEntry(callKey, argsBytes - CALL_OVERHEAD_BYTES, now),
        // The arguments as kept (a call refused at parking had them dropped) and the envelope,
        // twice: BullMQ keeps it in the job and again in its queue's event stream (`completed`,
        // trimmed at 1,000 events, and by `pruneFinishedJobs` at the same age as the job): the
        // bench measured 128 KB of Redis per 64 KB envelope. A second run's note of the same
        // call finds `call` gone (nothing given back twice) and `done` as the first left it when
        // its envelope is of the same bytes; of other bytes, both are counted until they expire.
        { callKey, kind: 'done', bytes: kept + 2 * envelopeBytes, until },
      ],
      (err) => log().error({ err: String(err) }, "could not count a call against its workspace's Redis budget"),
    );
  }

  /**
   * The announce of job `id`'s call, held to go in the script that completes the job (see
   * `CallCompletion.takeRider`), taken by its worker; once a worker takes them ({@link carryRiders}).
   */
  riderFor(id: string): Rider | undefined {
    return this.completion.takeRider(id);
  }

  /** Says that the worker running these jobs completes each with its rider ({@link riderFor}). */
  carryRiders(): void {
    this.completion.carryRiders();
  }

  private announce(envelope: Envelope, event: CompletedEvent, meter: Metering | undefined, log: () => Logger, job?: string): void {
    this.completion.announce(envelope, event, meter, job, (err) => log().error({ err: String(err) }, 'could not announce or meter a call'));
  }
}
