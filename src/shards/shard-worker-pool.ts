import { randomUUID } from 'node:crypto';
import { RedisOffloadQuota } from '../blobs/offload-quota.ts';
import type { ChildModule } from '../executor/child-module.ts';
import { Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { CallJobData } from '../contracts/call.ts';
import { errorEnvelope } from '../contracts/envelope.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import { ExecutorPool } from '../executor/executor-pool.ts';
import { AgentShare } from '../calls/agent-share.ts';
import { CallCompletion, type Metering } from '../calls/call-completion.ts';
import { callFingerprint, callKeyOf } from '../contracts/call-identity.ts';
import { claimTtlS, yieldToRecord } from '../calls/call-id-claim.ts';
import type { Envelope } from '../contracts/envelope.ts';
import { completedEvent, type CompletedEvent } from '../redis/events.ts';
import { runCall, type RunOutcome } from '../calls/call-runner.ts';
import { failedCallEnvelope } from '../calls/call-answers.ts';
import { CallParking } from '../calls/call-parking.ts';
import { ApprovalStore } from '../approvals/approval-store.ts';
import { connectRedis } from '../redis/connection.ts';
import { closeWorker } from '../redis/close-worker.ts';
import { handleErrorEvents } from '../redis/error-events.ts';
import { ExecutorStatusPublisher } from './executor-status-publisher.ts';
import { keysFor, type Keys } from '../redis/keys.ts';
import { leaseToken, ShardLease } from './shard-lease.ts';
import { releaseDeadOwnerJobs } from './dead-owner-jobs.ts';
import { UnheldJobs } from './unheld-jobs.ts';
import { SHARD_OP_PREFIX, type ShardOpJobData, type ShardOpOutcome } from '../contracts/shard-op.ts';
import { codeOf } from '../errors.ts';
import { shardOpHandlers, type ShardOpHandler } from './ops/shard-ops.ts';
import type { BlobStore } from '../blobs/blob-store.ts';
import { openBlobStore } from '../blobs/blob-stores.ts';
import { OffloadedResults } from '../blobs/offloaded-results.ts';

/** Options of a {@link ShardWorkerPool}. */
export interface ShardWorkerPoolOptions {
  config: Config;
  /** The shards this process may own; it takes each one whose lease is free. */
  shards: number[];
  logger: Logger;
  /** The executor children's module (see `ExecutorProcessOptions.child`); tests fork the build. */
  executorChild?: ChildModule;
}

/**
 * A worker process's shards: it holds a renewed lease on each shard it owns, runs a BullMQ
 * worker on that shard's queue (no agent holding more than its share of it), and runs every
 * statement in its pool of executor children, publishing what they do. A shard whose lease
 * lapses elsewhere is taken over on the next tick; a shard whose lease this process loses is
 * let go at once, so two processes never open the same file.
 */
export class ShardWorkerPool {
  private readonly keys: Keys;
  private readonly redis: Redis;
  private readonly lease: ShardLease;
  private readonly executor: ExecutorPool;
  private readonly agentShare: AgentShare;
  private readonly status: ExecutorStatusPublisher;
  /** This process among workers: its lease token, and the key of its published status. */
  readonly id = leaseToken(randomUUID());
  private readonly completion: CallCompletion;
  private readonly parking: CallParking;
  private readonly blobs: BlobStore;
  private readonly results: OffloadedResults;
  private readonly workers = new Map<number, Worker>();
  private readonly unheld: UnheldJobs;
  private readonly ops: Record<string, ShardOpHandler> = shardOpHandlers();
  /** Completions of large results, held until BullMQ has stored them (see `process`). */
  private readonly announceOnceFinished = new Map<string, () => void>();
  private timer?: NodeJS.Timeout;
  private ticking?: Promise<void>;
  private stopped = false;
  /** Set once the first round of leases is done: before it, what this process owns says nothing. */
  private leasesChecked = false;

  constructor(private readonly opts: ShardWorkerPoolOptions) {
    const { config } = opts;
    this.keys = keysFor(config.prefix);
    this.redis = connectRedis(config.redisUrl, { blocking: true, name: 'agentdb-worker' });
    this.executor = new ExecutorPool({
      size: config.executorPoolSize,
      workspaceShare: config.executorWorkspaceShare,
      dataDir: config.dataDir,
      statementTimeoutMs: config.statementTimeoutMs,
      heapLimitMb: config.executorHeapLimitMb,
      handleCacheSize: config.handleCacheSize,
      maxResultBytes: config.maxResultBytes,
      maxOffloadBytes: config.maxOffloadBytes,
      statementCacheBytes: config.statementCacheBytes,
      ...(config.history ? { history: config.history } : {}),
      ...(opts.executorChild ? { child: opts.executorChild } : {}),
      logger: opts.logger,
    });
    this.completion = new CallCompletion(this.redis, this.keys);
    this.blobs = openBlobStore(config);
    this.results = new OffloadedResults(this.blobs, {
      dataDir: config.dataDir,
      ttlS: config.resultTtlS,
      logger: opts.logger,
      quota: new RedisOffloadQuota(this.redis, this.keys, config.maxOffloadedBytesPerWorkspace),
    });
    this.parking = new CallParking({
      store: new ApprovalStore(this.redis, this.keys),
      redis: this.redis,
      keys: this.keys,
      approvalTtlMs: config.approvalTtlMs,
      executor: this.executor,
      config,
      logger: opts.logger,
    });
    this.unheld = new UnheldJobs(this.redis, this.keys.bullPrefix, opts.logger);
    // A ready after a drop (not the first connect): a job handed over as Redis died may sit
    // active with nobody running it (see UnheldJobs).
    let connected = false;
    this.redis.on('ready', () => {
      if (connected) this.unheld.reconnected();
      connected = true;
    });
    this.lease = new ShardLease(this.redis, this.keys, this.id, config.leaseTtlMs);
    this.agentShare = new AgentShare(config.agentShardConcurrency, opts.logger);
    this.status = new ExecutorStatusPublisher(this.redis, this.keys, () => ({
      worker: this.id,
      pid: process.pid,
      shards: this.ownedShards(),
      pool: this.executor.status(),
    }));
  }

  /** Starts the executors and takes every free shard; renews and takes over on a timer. */
  async start(): Promise<void> {
    await this.executor.start();
    this.opts.logger.info({ pids: this.executor.pids }, 'executor pool ready');
    this.status.start();
    await this.tick();
    this.leasesChecked = true;
    const every = Math.max(100, Math.floor(this.opts.config.leaseTtlMs / 3));
    this.timer = setInterval(() => {
      this.ticking ??= this.tick().finally(() => (this.ticking = undefined));
    }, every);
  }

  /** The shards this process owns now. */
  ownedShards(): number[] {
    return [...this.workers.keys()].sort((a, b) => a - b);
  }

  /**
   * The shards of this process's range that nobody owns: neither this process nor another
   * worker holding its lease. Every one of them until the first round of leases is done. What
   * `GET /ready` waits for (an empty list), so traffic is not sent to a process whose shards
   * have no worker yet.
   */
  async shardsWithoutOwner(): Promise<number[]> {
    if (!this.leasesChecked || this.stopped) return [...this.opts.shards];
    const others = this.opts.shards.filter((shard) => !this.workers.has(shard));
    if (others.length === 0) return [];
    // One GET per lease, pipelined: each lease has its own hash tag, so no multi-key command.
    const pipeline = this.redis.pipeline();
    for (const shard of others) pipeline.get(this.keys.lease(shard));
    const holders = (await pipeline.exec()) ?? [];
    return others.filter((_, i) => {
      const [err, holder] = holders[i] ?? [];
      return err || holder === null || holder === undefined;
    });
  }

  /** The first executor child's pid (for operators and tests). */
  get executorPid(): number | undefined {
    return this.executor.pids[0];
  }

  /** Every executor child's pid (for operators and tests). */
  get executorPids(): number[] {
    return this.executor.pids;
  }

  /** Finishes the jobs in hand, gives every lease back and stops the executor. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    // Every shard's worker stops taking jobs at once, before anything waits: a tick in flight
    // during a Redis outage waits for Redis, and the workers took jobs again when it returned.
    const letGo = Promise.all(this.ownedShards().map((shard) => this.letGo(shard, true)));
    await this.ticking;
    await letGo;
    this.status.stop();
    await this.executor.stop();
    await this.blobs.close();
    this.redis.disconnect();
  }

  private async tick(): Promise<void> {
    for (const shard of this.opts.shards) {
      if (this.stopped) return;
      let owned: boolean;
      try {
        owned = await this.lease.acquire(shard);
      } catch (err) {
        this.opts.logger.warn({ shard, err: String(err) }, 'lease check failed');
        owned = false;
      }
      // A stop that began while the lease was being asked for takes no shard.
      if (this.stopped) return;
      if (owned && !this.workers.has(shard)) await this.own(shard);
      else if (!owned && this.workers.has(shard)) {
        this.opts.logger.warn({ shard }, 'shard lease lost; letting the shard go');
        await this.letGo(shard, false);
      }
    }
    if (this.stopped) return;
    await this.unheld.check(this.workers).catch((err: unknown) => this.opts.logger.warn({ err: String(err) }, 'could not look for unheld jobs'));
  }

  private async own(shard: number): Promise<void> {
    const { config, logger } = this.opts;
    try {
      const released = await releaseDeadOwnerJobs(this.redis, this.keys.bullPrefix, this.keys.queueName(shard));
      if (released) logger.info({ shard, jobs: released }, "took over the previous owner's jobs in hand");
    } catch (err) {
      // Their locks lapse on their own; the shard is still ours to run.
      logger.warn({ shard, err: String(err) }, "could not take over the previous owner's jobs");
    }
    if (this.stopped) return;
    const processor = (job: Job, token?: string) =>
      this.unheld.hold<unknown>(token!, job.id!, () =>
        job.name.startsWith(SHARD_OP_PREFIX)
          ? this.runOp(job as Job<ShardOpJobData>, shard)
          : this.agentShare.run(job as Job<CallJobData>, token!, shard, () => this.process(job as Job<CallJobData>, token!, shard)),
      );
    const worker = new Worker(this.keys.queueName(shard), processor, {
      connection: this.redis,
      prefix: this.keys.bullPrefix,
      concurrency: config.workerConcurrency,
      lockDuration: config.lockDurationMs,
      stalledInterval: config.stalledIntervalMs,
      autorun: true,
    });
    handleErrorEvents(worker, logger, 'shard worker error', { shard });
    worker.on('completed', (job) => {
      this.unheld.ended(job.token, job.id);
      const announce = this.announceOnceFinished.get(job.id!);
      this.announceOnceFinished.delete(job.id!);
      announce?.();
    });
    // A job that throws has hit a fault, not an agent error; once its retries are spent the
    // caller must still hear the outcome.
    worker.on('failed', (job, err) => {
      this.unheld.ended(job?.token, job?.id);
      if (job) this.announceOnceFinished.delete(job.id!);
      if (!job || job.attemptsMade < (job.opts.attempts ?? 1) || job.name.startsWith(SHARD_OP_PREFIX)) return;
      logger.error({ shard, callId: job.id, err: String(err) }, 'call failed after its retries');
      const envelope = failedCallEnvelope(job.data, err.message);
      const event = completedEvent(envelope, job.data.workspace, job.data.agent);
      void this.completion.complete(envelope, event).catch((e) => logger.error({ callId: job.id, err: String(e) }, 'could not announce a failed call'));
    });
    this.workers.set(shard, worker);
    logger.info({ shard }, 'shard owned');
  }

  private async letGo(shard: number, graceful: boolean): Promise<void> {
    const worker = this.workers.get(shard);
    this.workers.delete(shard);
    // A lost lease means someone else may own the files now: stop at once (jobs in hand are
    // retried by the new owner, and exactly-once keeps writes single).
    if (worker) await closeWorker(worker, !graceful);
    this.agentShare.forgetShard(shard);
    await this.executor.run({ op: 'evict', shards: [shard] });
    if (graceful) await this.lease.release(shard).catch(() => undefined);
    this.opts.logger.info({ shard }, 'shard released');
  }

  /**
   * A shard op (not a call): no agent share, no parking, no metering. An `AgentDbError` is an
   * answer; anything else is a fault and fails the job for BullMQ to retry.
   */
  private async runOp(job: Job<ShardOpJobData>, shard: number): Promise<ShardOpOutcome> {
    const handler = Object.hasOwn(this.ops, job.data.op) ? this.ops[job.data.op] : undefined;
    if (!handler) return { ok: false, error: { code: 'INVALID_ARGUMENTS', detail: `no shard op named "${job.data.op}"` } };
    const logger = this.opts.logger.child({ op: job.data.op, jobId: job.id, shard });
    try {
      const result = await handler(job.data, { shard, executor: this.executor, config: this.opts.config, logger, job });
      return { ok: true, result };
    } catch (err) {
      const code = codeOf(err);
      if (!code) throw err;
      return { ok: false, error: { code, detail: (err as { detail?: string }).detail ?? String(err) } };
    }
  }

  private async process(job: Job<CallJobData>, token: string, shard: number) {
    // Made only when something is logged: on the hot path nothing is, at the default level.
    const log = () => this.opts.logger.child({ callId: job.id, shard });
    const started = Date.now();
    const deps = { config: this.opts.config, executor: this.executor, results: this.results };
    const { data } = job;
    let outcome: RunOutcome;
    if (job.id !== callKeyOf(data)) {
      // Clients name a job after its caller's key; a job that names another call was not
      // enqueued by one, and must not stand in for that call's result or approval.
      outcome = { envelope: errorEnvelope(String(data.callId), String(data.tool), 'INTERNAL', 'The job id does not name its call.'), meter: undefined };
    } else {
      const result = await runCall(data, shard, deps);
      outcome = 'park' in result ? await this.parking.handle(job, token, result, (approved) => runCall(data, shard, deps, approved)) : result;
    }
    const { envelope, meter } = outcome;
    if (outcome.heldByRecord) {
      // Before the answer: once the caller hears it, a re-send of the recorded call must find
      // the id free for it (a claim kept by this call answered it "nothing ran").
      const { config } = this.opts;
      const fingerprint = callFingerprint({ ...data, database: outcome.heldByRecord.database });
      await yieldToRecord(this.redis, this.keys, job.id!, fingerprint, outcome.heldByRecord, claimTtlS(config.resultTtlS, config.approvalTtlMs));
    }
    const event = completedEvent(envelope, data.workspace, data.agent);
    const metering = meter === undefined ? undefined : { workspace: data.workspace, agent: data.agent, credits: meter, at: started };
    if (event.inline) {
      // Not awaited: the event and BullMQ's own completion go out back to back on this one
      // connection, so the caller hears of the result a round trip sooner. Nothing is less
      // safe for it: the event carries the envelope, and a Redis failure here fails the job's
      // completion as well, so the call is retried (and replayed).
      this.announce(envelope, event, metering, log);
    } else {
      // An event without its envelope sends the caller to the job for it, so it may only leave
      // once BullMQ has stored the result: announced from the worker's `completed` event. (Sent
      // first, a caller found the job unfinished and waited for its safety-net check: ~30 s.)
      this.announceOnceFinished.set(job.id!, () => this.announce(envelope, event, metering, log));
    }
    if (this.opts.logger.isLevelEnabled('debug')) {
      log().debug({ tool: envelope.tool, ok: envelope.ok, code: envelope.ok ? undefined : envelope.error.code, ms: Date.now() - started }, 'call done');
    }
    return envelope;
  }

  private announce(envelope: Envelope, event: CompletedEvent, meter: Metering | undefined, log: () => Logger): void {
    this.completion.complete(envelope, event, meter).catch((err) => log().error({ err: String(err) }, 'could not announce or meter a call'));
  }
}
