// What a shard worker and its executor children run with: concurrency, the pool and its
// overflow lane, leases, locks, the drain on stop, statement time and memory. A part of the one
// schema (see src/config.ts): each variable's entry, its Config field and their mapping, together.

import os from 'node:os';
import { z } from 'zod';
import { int } from './env-checks.ts';

const workersSchema = z.object({
  STATEMENT_TIMEOUT_MS: int(10, 600_000, 10_000),
  /** Jobs a shard's BullMQ worker holds at once. */
  WORKER_CONCURRENCY: int(1, 1000, 32),
  /**
   * Calls of one agent a shard's worker runs at once; its next call goes back to the queue
   * (delayed, not refused) until one ends. Default: a quarter of WORKER_CONCURRENCY, at least 1.
   */
  AGENT_SHARD_CONCURRENCY: z.coerce.number().int().min(1).max(1000).optional(),
  /**
   * Calls and shard ops of one workspace a shard's worker runs at once, its agents' together;
   * more go back to the queue as an agent's do. Default: half of WORKER_CONCURRENCY, and never
   * fewer than AGENT_SHARD_CONCURRENCY. A deployment of one workspace may raise it to
   * WORKER_CONCURRENCY: the bound is there so one workspace cannot hold every slot from another.
   */
  WORKSPACE_SHARD_CONCURRENCY: z.coerce.number().int().min(1).max(1000).optional(),
  /** Executor children per worker process. Default: the CPUs this process may use, at least 2. */
  EXECUTOR_POOL_SIZE: z.coerce.number().int().min(1).max(1024).optional(),
  /** Children one workspace may hold at once. Default: half the pool, rounded up. */
  EXECUTOR_WORKSPACE_SHARE: z.coerce.number().int().min(1).max(1024).optional(),
  /**
   * Executor children beyond the pool for the overflow lane: taken only while every pooled child
   * runs a statement past EXECUTOR_LONG_MS, by a statement its workspace saw finish quickly (a
   * quiet workspace's usual read under a burst of runaways). 0: no lane.
   */
  EXECUTOR_OVERFLOW: int(0, 64, 1),
  /** What counts as a long statement for the overflow lane, in ms. */
  EXECUTOR_LONG_MS: int(10, 600_000, 250),
  /** How long a shard lease lives without renewal before another worker may take the shard. */
  LEASE_TTL_MS: int(500, 600_000, 10_000),
  /** BullMQ job lock; a dead worker's job is retried after it lapses. */
  LOCK_DURATION_MS: int(500, 600_000, 30_000),
  STALLED_INTERVAL_MS: int(500, 600_000, 30_000),
  /**
   * How long after a person's decision a worker announces it and wakes its call when its decider
   * did not (it died, or lost Redis, in between): see src/approvals/undelivered-decisions.ts.
   */
  DECISION_WAKE_AFTER_MS: int(100, 600_000, 10_000),
  /**
   * How long a stopping process (SIGTERM, SIGINT) lets the jobs in hand finish and its leases go
   * back before it exits anyway: a stop during a Redis outage otherwise waited for Redis.
   */
  DRAIN_GRACE_MS: int(100, 600_000, 10_000),
  /**
   * How often a scheduler looks for its job schedulers and puts back any that are missing (a
   * Redis that came back empty lost them); it also looks each time its connection comes back.
   */
  SCHEDULER_CHECK_MS: int(500, 3_600_000, 60_000),
  /** SQLite's memory per executor child, so a huge allocation fails instead of the host. */
  EXECUTOR_HEAP_LIMIT_MB: int(16, 65_536, 512),
  /** Open SQLite handles kept per executor child; ten thousand databases must not mean ten thousand files. */
  HANDLE_CACHE_SIZE: int(1, 100_000, 128),
  /**
   * Memory the prepared statements an executor child keeps may take, as estimated, across all
   * its databases; statements past a sixteenth of it are not kept at all.
   */
  STATEMENT_CACHE_BYTES: int(0, 4 * 1024 * 1024 * 1024, 32 * 1024 * 1024),
});

/** This part's entries of the environment's schema, which `loadConfig` joins. */
export const workersEnv = workersSchema.shape;

/** This part's fields of the frozen `Config`. */
export interface WorkersConfig {
  /** STATEMENT_TIMEOUT_MS: a statement past it is killed (STATEMENT_TIMEOUT). */
  readonly statementTimeoutMs: number;
  /** WORKER_CONCURRENCY: jobs a shard worker runs at once. */
  readonly workerConcurrency: number;
  /** AGENT_SHARD_CONCURRENCY: calls of one agent a shard's worker runs at once; more go back to the queue. */
  readonly agentShardConcurrency: number;
  /** WORKSPACE_SHARD_CONCURRENCY, at least `agentShardConcurrency` (one agent holds no more than its workspace). */
  readonly workspaceShardConcurrency: number;
  /** EXECUTOR_POOL_SIZE: executor children per worker process. */
  readonly executorPoolSize: number;
  /** EXECUTOR_WORKSPACE_SHARE: executor children one workspace may hold at once. */
  readonly executorWorkspaceShare: number;
  /** Overflow-lane children beyond the pool (EXECUTOR_OVERFLOW). */
  readonly executorOverflow: number;
  /** A statement past this (ms) counts as long for the overflow lane (EXECUTOR_LONG_MS). */
  readonly executorLongMs: number;
  /** LEASE_TTL_MS: a shard's lease; a dead worker's shards move after it. */
  readonly leaseTtlMs: number;
  /** LOCK_DURATION_MS: BullMQ's job lock; a dead worker's job is retried after it. */
  readonly lockDurationMs: number;
  /** STALLED_INTERVAL_MS: how often BullMQ looks for jobs whose lock ran out. */
  readonly stalledIntervalMs: number;
  /** DECISION_WAKE_AFTER_MS. */
  readonly decisionWakeAfterMs: number;
  /** DRAIN_GRACE_MS. */
  readonly drainGraceMs: number;
  /** SCHEDULER_CHECK_MS. */
  readonly schedulerCheckMs: number;
  /** EXECUTOR_HEAP_LIMIT_MB: SQLite's memory per executor child (RESOURCE_LIMIT past it). */
  readonly executorHeapLimitMb: number;
  /** HANDLE_CACHE_SIZE: open SQLite handles per executor child. */
  readonly handleCacheSize: number;
  /** STATEMENT_CACHE_BYTES: estimated memory of the prepared statements each executor child keeps. */
  readonly statementCacheBytes: number;
}

/** This part's fields of `Config`, from its variables as validated. */
export function workersConfig(e: z.infer<typeof workersSchema>): WorkersConfig {
  const executorPoolSize = e.EXECUTOR_POOL_SIZE ?? Math.max(2, os.availableParallelism());
  const agentShardConcurrency = e.AGENT_SHARD_CONCURRENCY ?? Math.max(1, Math.floor(e.WORKER_CONCURRENCY / 4));
  return {
    statementTimeoutMs: e.STATEMENT_TIMEOUT_MS,
    workerConcurrency: e.WORKER_CONCURRENCY,
    agentShardConcurrency,
    workspaceShardConcurrency: Math.max(agentShardConcurrency, e.WORKSPACE_SHARD_CONCURRENCY ?? Math.ceil(e.WORKER_CONCURRENCY / 2)),
    executorPoolSize,
    // More than the pool would mean no limit at all; say what is enforced.
    executorWorkspaceShare: Math.min(executorPoolSize, e.EXECUTOR_WORKSPACE_SHARE ?? Math.ceil(executorPoolSize / 2)),
    executorOverflow: e.EXECUTOR_OVERFLOW,
    executorLongMs: e.EXECUTOR_LONG_MS,
    leaseTtlMs: e.LEASE_TTL_MS,
    lockDurationMs: e.LOCK_DURATION_MS,
    stalledIntervalMs: e.STALLED_INTERVAL_MS,
    decisionWakeAfterMs: e.DECISION_WAKE_AFTER_MS,
    drainGraceMs: e.DRAIN_GRACE_MS,
    schedulerCheckMs: e.SCHEDULER_CHECK_MS,
    executorHeapLimitMb: e.EXECUTOR_HEAP_LIMIT_MB,
    handleCacheSize: e.HANDLE_CACHE_SIZE,
    statementCacheBytes: e.STATEMENT_CACHE_BYTES,
  };
}
