import { randomUUID } from 'node:crypto';
import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { BlobStore } from '../blobs/blob-store.ts';
import { openBlobStore } from '../blobs/blob-stores.ts';
import { OffloadedResults } from '../blobs/offloaded-results.ts';
import { ApprovalService } from '../approvals/approval-service.ts';
import { deliverDecisions } from '../approvals/undelivered-decisions.ts';
import { AgentShare } from '../calls/agent-share.ts';
import { claimTtlS } from '../calls/call-id-claim.ts';
import { CallIdLedger } from '../calls/call-id-ledger.ts';
import type { Config } from '../config.ts';
import type { ChildModule } from '../executor/child-module.ts';
import type { ExecutorPool } from '../executor/executor-pool.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { closeWorker } from '../redis/close-worker.ts';
import { connectRedis } from '../redis/connection.ts';
import { keysFor, type Keys } from '../redis/keys.ts';
import { publishShardCount } from '../redis/service-shard-count.ts';
import { serviceWorkspaceQuota } from '../history/workspace-quota.ts';
import { MemberRegistry } from '../registry/members.ts';
import { CallJobProcessor } from './call-job-processor.ts';
import { outsideKillCounts } from '../redis/outside-kill-counts.ts';
import { releaseDeadOwnerJobs } from './dead-owner-jobs.ts';
import { ExecutorStatusPublisher } from './executor-status-publisher.ts';
import { shardOpHandlers, type ShardOpHandler } from './ops/shard-ops.ts';
import { leaseToken, ShardLease } from './shard-lease.ts';
import { shardsWithoutLease } from './unowned-shards.ts';
import { type ShardWorkerDeps, startShardWorker } from './shard-worker-start.ts';
import { StaleMarkers } from './stale-markers.ts';
import { UnheldJobs } from './unheld-jobs.ts';
import { workerExecutorPool } from './worker-executor-pool.ts';
import { registerWorkerGauges } from './worker-gauges.ts';
import { tracerIf } from '../tracing.ts';
import type { Tracer } from '@opentelemetry/api';

/** Options of a {@link ShardWorkerPool}. */
export interface ShardWorkerPoolOptions {
  config: Config;
  /** The shards this process may own; it takes each one whose lease is free. */
  shards: number[];
  logger: Logger;
  /** The executor children's module (see `ExecutorProcessOptions.child`); tests fork the build. */
  executorChild?: ChildModule;
  /** Where calls, executor kills and quota refusals are counted, and the pool's gauges read (`/metrics`). */
  metrics?: Metrics;
  /** How long a workspace's disk verdict for writes is used (`WorkspaceQuota.writesRefusal`); tests set 0. */
  writesVerdictKeepMs?: number;
  /** Shard ops run in place of this build's, by name: tests run a worker answering as an older build does (a rolling deploy). */
  ops?: Record<string, ShardOpHandler>;
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
  private readonly workspaceShare: AgentShare;
  private readonly status: ExecutorStatusPublisher;
  /** This process among workers: its lease token, and the key of its published status. */
  readonly id = leaseToken(randomUUID());
  private readonly calls: CallJobProcessor;
  private readonly callIds: CallIdLedger;
  private readonly blobs: BlobStore;
  private readonly workers = new Map<number, Worker>();
  private readonly unheld: UnheldJobs;
  /** Finishes decisions whose decider died before it woke their calls (`deliverDecisions`), on the tick. */
  private readonly approvals: ApprovalService;
  /** What each shard's worker runs its jobs with (shard-worker-start.ts). */
  private readonly shardDeps: ShardWorkerDeps;
  private timer?: NodeJS.Timeout;
  private ticking?: Promise<void>;
  private stopped = false;
  /** Set once the first round of leases is done: before it, what this process owns says nothing. */
  private leasesChecked = false;
  /** TRACING=on: agentdb's tracer on the process's registered provider. */
  private readonly tracer?: Tracer;

  constructor(private readonly opts: ShardWorkerPoolOptions) {
    const { config } = opts;
    this.tracer = tracerIf(config.tracing);
    this.keys = keysFor(config.prefix);
    this.redis = connectRedis(config.redisUrl, { blocking: true, name: 'agentdb-worker' });
    this.executor = workerExecutorPool({ ...opts, outsideKills: outsideKillCounts(this.redis, this.keys) });
    this.blobs = openBlobStore(config);
    const { quota, offloaded: offloadQuota } = serviceWorkspaceQuota({
      config,
      redis: this.redis,
      keys: this.keys,
      ...(opts.metrics ? { onRefused: (_ws: string, kind: string) => opts.metrics!.refusals.inc({ quota: kind }) } : {}),
      ...(opts.writesVerdictKeepMs !== undefined ? { writesVerdictKeepMs: opts.writesVerdictKeepMs } : {}),
    });
    const results = new OffloadedResults(this.blobs, {
      dataDir: config.dataDir,
      ttlS: config.resultTtlS,
      logger: opts.logger,
      quota: offloadQuota,
    });
    this.callIds = new CallIdLedger({
      dataDir: config.dataDir,
      retentionMs: claimTtlS(config.resultTtlS, config.approvalTtlMs) * 1000,
      onError: (workspace, err) => opts.logger.warn({ workspace, err: String(err) }, 'call-id ledger failed; the call goes on with its Redis claim alone'),
    });
    this.calls = new CallJobProcessor({
      config,
      logger: opts.logger,
      redis: this.redis,
      keys: this.keys,
      executor: this.executor,
      results,
      callIds: this.callIds,
      quota,
      ...(opts.metrics ? { metrics: opts.metrics } : {}),
      ...(this.tracer ? { tracer: this.tracer } : {}),
    });
    this.unheld = new UnheldJobs(this.redis, this.keys.bullPrefix, opts.logger);
    this.approvals = new ApprovalService({
      redis: this.redis,
      prefix: config.prefix,
      shardCount: config.shardCount,
      members: new MemberRegistry(this.redis, this.keys),
    });
    // A ready after a drop (not the first connect): a job handed over as Redis died may sit
    // active with nobody running it (see UnheldJobs).
    let connected = false;
    this.redis.on('ready', () => {
      if (connected) this.unheld.reconnected();
      connected = true;
    });
    if (opts.metrics) registerWorkerGauges(opts.metrics, this.executor, () => this.workers.size);
    this.lease = new ShardLease(this.redis, this.keys, this.id, config.leaseTtlMs);
    this.agentShare = new AgentShare(config.agentShardConcurrency, opts.logger);
    // A workspace of four agents (or members) with runaway statements held every slot on their
    // agent shares alone, and another workspace's one-row read waited for a runaway's deadline
    // (session 30, T7): the workspace's share bounds them together, taken before its agent's.
    this.workspaceShare = new AgentShare(config.workspaceShardConcurrency, opts.logger, 'workspace');
    this.status = new ExecutorStatusPublisher(this.redis, this.keys, () => ({
      worker: this.id,
      pid: process.pid,
      shards: this.ownedShards(),
      pool: this.executor.status(),
    }));
    const { redis, keys, executor, calls, agentShare, workspaceShare, unheld } = this;
    this.shardDeps = {
      config,
      logger: opts.logger,
      redis,
      keys,
      executor,
      quota,
      calls,
      agentShare,
      workspaceShare,
      unheld,
      markers: new StaleMarkers(redis),
      ops: { ...shardOpHandlers(), ...opts.ops },
      ...(this.tracer ? { tracer: this.tracer } : {}),
    };
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
    return shardsWithoutLease(
      this.redis,
      this.keys,
      this.opts.shards.filter((shard) => !this.workers.has(shard)),
    );
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
    await this.approvals.close();
    await this.executor.stop();
    this.callIds.close();
    await this.blobs.close();
    this.redis.disconnect();
  }

  private async tick(): Promise<void> {
    // Every round, not once: a Redis that came back empty has it again before clients need it.
    await publishShardCount(this.redis, this.keys, this.opts.config.shardCount).catch(() => undefined);
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
    if (this.stopped) return;
    try {
      const delivered = await deliverDecisions(this.approvals, this.opts.config.decisionWakeAfterMs);
      if (delivered) this.opts.logger.warn({ decisions: delivered }, 'announced decisions and woke their calls: their deciders stopped before they did');
    } catch (err) {
      this.opts.logger.warn({ err: String(err) }, 'could not deliver undelivered decisions');
    }
  }

  private async own(shard: number): Promise<void> {
    const { logger } = this.opts;
    try {
      const released = await releaseDeadOwnerJobs(this.redis, this.keys.bullPrefix, this.keys.queueName(shard));
      if (released) logger.info({ shard, jobs: released }, "took over the previous owner's jobs in hand");
    } catch (err) {
      // Their locks lapse on their own; the shard is still ours to run.
      logger.warn({ shard, err: String(err) }, "could not take over the previous owner's jobs");
    }
    if (this.stopped) return;
    this.workers.set(shard, startShardWorker(shard, this.shardDeps));
    logger.info({ shard }, 'shard owned');
  }

  private async letGo(shard: number, graceful: boolean): Promise<void> {
    const worker = this.workers.get(shard);
    this.workers.delete(shard);
    // A lost lease means someone else may own the files now: stop at once (jobs in hand are
    // retried by the new owner, and exactly-once keeps writes single).
    if (worker) await closeWorker(worker, !graceful);
    this.agentShare.forgetShard(shard);
    this.workspaceShare.forgetShard(shard);
    await this.executor.run({ op: 'evict', shards: [shard] });
    if (graceful) await this.lease.release(shard).catch(() => undefined);
    this.opts.logger.info({ shard }, 'shard released');
  }
}
