import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import { connectRedis } from '../redis/connection.ts';
import { closeWorker } from '../redis/close-worker.ts';
import { handleErrorEvents } from '../redis/error-events.ts';
import { keysFor, type Keys } from '../redis/keys.ts';
import { pruneFinishedJobs, pruneRedis } from './redis-maintenance.ts';
import type { BlobStore } from '../blobs/blob-store.ts';
import { openBlobStore } from '../blobs/blob-stores.ts';
import { OffloadedResults } from '../blobs/offloaded-results.ts';
import { pruneBlobBackups } from '../history/blob-prune.ts';
import { runBackups } from '../shards/backups.ts';
import { BackupLog } from '../shards/backup-log.ts';
import { pruneHistory, type HistoryPruneReport } from '../history/prune.ts';
import { sweepMoments } from '../history/as-of-cache.ts';
import { ShardOpClient } from '../shards/shard-op-client.ts';

const QUEUE = '{maintenance}';
const PRUNE = 'prune';
const BACKUP = 'backup';
const HISTORY_PRUNE = 'history-prune';
const HISTORY_SNAPSHOT = 'history-snapshot';
const RESULTS_TRIM = 'results-trim';
const AS_OF_SWEEP = 'as-of-sweep';
/**
 * How often kept `as_of` moments past AS_OF_KEEP_MINUTES are dropped. The executor children
 * sweep only when someone reads the past, so once reads stopped the copies stayed (hostile
 * review H27-6); a minute is what the children's own sweep waits between runs.
 */
const AS_OF_SWEEP_EVERY_MS = 60_000;
/** AS_OF_KEEP_MINUTES' default, for a scheduler whose config has history capture off. */
const AS_OF_KEEP_DEFAULT_MS = 15 * 60_000;

/**
 * When the nightly backup runs next (epoch ms), as its job scheduler in Redis says; undefined
 * while no scheduler has registered it (no `agentdb start` or `agentdb scheduler` ran yet).
 * For `agentdb backups`, which runs no scheduler of its own.
 */
export async function nextBackupRun(redis: Redis, keys: Keys): Promise<number | undefined> {
  const queue = new Queue(QUEUE, { connection: redis, prefix: keys.bullPrefix });
  try {
    return (await queue.getJobScheduler(BACKUP))?.next ?? undefined;
  } finally {
    await queue.close();
  }
}

/**
 * agentdb's scheduled work, on BullMQ job schedulers (cron and time zone from the config): the
 * nightly prune of Redis past its retention, the nightly history snapshot of every database
 * (a shard op on each shard, run by its owner) and the prune of local history past
 * HISTORY_RETENTION_DAYS. Any number of processes may run it;
 * BullMQ makes one job per tick and one worker takes it.
 */
export class Scheduler {
  private readonly keys: Keys;
  private readonly redis: Redis;
  private readonly queue: Queue;
  private readonly blobs: BlobStore;
  private worker?: Worker;
  private workerRedis?: Redis;
  private checkTimer?: NodeJS.Timeout;
  private checking?: Promise<void>;
  private stopping?: Promise<void>;
  private readonly onReady = () => void this.checkSchedules();

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
  ) {
    this.keys = keysFor(config.prefix);
    this.redis = connectRedis(config.redisUrl, { blocking: true, name: 'agentdb-scheduler' });
    this.queue = new Queue(QUEUE, { connection: this.redis, prefix: this.keys.bullPrefix });
    handleErrorEvents(this.queue, logger, 'scheduler queue error');
    this.blobs = openBlobStore(config);
  }

  /**
   * Registers the schedules (idempotent) and starts taking their jobs. From then on it puts
   * back any schedule found missing: each time its connection to Redis is ready again, and
   * every SCHEDULER_CHECK_MS. A Redis that came back empty had lost them, and the nightly
   * backup, snapshot and prune did not run again until a restart while /health said 200.
   */
  async start(): Promise<void> {
    // Every one upserted: a changed cron or time zone takes effect at start.
    await this.ensureSchedules(false);
    this.redis.on('ready', this.onReady);
    this.checkTimer = setInterval(() => void this.checkSchedules(), this.config.schedulerCheckMs);
    this.checkTimer.unref();
    const jobs: Record<string, () => Promise<unknown>> = {
      [PRUNE]: () => this.prune(),
      [HISTORY_PRUNE]: async () => this.pruneHistory(),
      [HISTORY_SNAPSHOT]: () => this.snapshotHistory(),
      [BACKUP]: () => this.backup(),
      [RESULTS_TRIM]: () => this.trimResults(),
      [AS_OF_SWEEP]: async () => this.sweepAsOf(),
    };
    // Its own connection: a worker shares the one it is given with the blocking connection it
    // duplicates, and a stop right after a start (tests, a failed boot) then had a command of
    // the worker's still in flight when the queue's connection closed under it.
    this.workerRedis = connectRedis(this.config.redisUrl, { blocking: true, name: 'agentdb-scheduler-worker' });
    this.worker = new Worker(QUEUE, (job) => (jobs[job.name] ?? jobs[PRUNE]!)(), {
      connection: this.workerRedis,
      prefix: this.keys.bullPrefix,
      concurrency: 1,
    });
    handleErrorEvents(this.worker, this.logger, 'scheduler worker error');
    await this.worker.waitUntilReady();
  }

  /**
   * Registers each schedule (`onlyMissing`: each one that is missing) and says which it
   * registered. The periodic check leaves an existing one alone: upserting it again would
   * replace its next job for nothing.
   */
  async ensureSchedules(onlyMissing = true): Promise<string[]> {
    const opts = { removeOnComplete: { count: 30 }, removeOnFail: { count: 30 } };
    const schedules: [string, { pattern: string; tz: string } | { every: number }][] = [
      [PRUNE, { pattern: this.config.maintenanceCron, tz: this.config.scheduleTz }],
      [HISTORY_PRUNE, { pattern: this.config.historyPruneCron, tz: this.config.scheduleTz }],
      // Nightly: each shard owner snapshots and uploads its databases' history (see `backupOp`).
      [BACKUP, { pattern: this.config.backupCron, tz: this.config.backupTz }],
      [HISTORY_SNAPSHOT, { pattern: this.config.historySnapshotCron, tz: this.config.scheduleTz }],
      // Often, not nightly: the Redis budget gives a finished call's bytes back this soon after
      // RESULT_TTL_HOURS (see `CallJobProcessor`'s count).
      [RESULTS_TRIM, { every: this.config.resultTrimEveryS * 1000 }],
      [AS_OF_SWEEP, { every: AS_OF_SWEEP_EVERY_MS }],
    ];
    const added: string[] = [];
    for (const [name, repeat] of schedules) {
      if (onlyMissing && (await this.queue.getJobScheduler(name))) continue;
      await this.queue.upsertJobScheduler(name, repeat, { name, opts });
      added.push(name);
    }
    return added;
  }

  /** When the prune runs next (epoch ms), as BullMQ has it scheduled. */
  async nextRun(): Promise<number | undefined> {
    return (await this.queue.getJobScheduler(PRUNE))?.next;
  }

  /** When the nightly backup runs next (epoch ms). */
  async nextBackup(): Promise<number | undefined> {
    return (await this.queue.getJobScheduler(BACKUP))?.next;
  }

  /** Backs up every shard now, each on its owner (the scheduled job). */
  async backup() {
    const ops = new ShardOpClient({ redisUrl: this.config.redisUrl, prefix: this.config.prefix });
    try {
      const run = await runBackups(ops, this.config.shardCount, { log: new BackupLog(this.redis, this.keys) });
      const files = run.databases.reduce((n, r) => n + r.files, 0);
      if (run.failed.length) this.logger.error({ failed: run.failed }, 'backup failed on some shards');
      this.logger.info({ databases: run.databases.length, files }, 'nightly backup done');
      return { databases: run.databases.length, files, failed: run.failed.length };
    } finally {
      await ops.close();
    }
  }

  /** Runs the prune now (an operator's `agentdb prune`, and the scheduled job). */
  async prune(now = Date.now()) {
    const report = await pruneRedis(this.redis, this.keys, {
      now,
      usageDays: this.config.usageRetentionDays,
      approvalDays: this.config.approvalRetentionDays,
    });
    const jobs = await pruneFinishedJobs(this.redis, this.keys, { shardCount: this.config.shardCount, cutoff: now - this.config.resultTtlS * 1000 });
    const results = await new OffloadedResults(this.blobs, { dataDir: this.config.dataDir, ttlS: this.config.resultTtlS, now: () => now }).prune();
    const backups = await pruneBlobBackups(this.blobs, { retentionDays: this.config.historyRetentionDays, now });
    this.logger.info({ ...report, jobs, results, backups }, 'pruned past retention');
    return { ...report, jobs, results, backups: backups.generations };
  }

  /**
   * Removes every shard queue's finished calls past RESULT_TTL_HOURS and their events (the
   * scheduled `results-trim`, every RESULT_TRIM_EVERY_S); answers how many jobs went.
   */
  async trimResults(now = Date.now()): Promise<number> {
    return pruneFinishedJobs(this.redis, this.keys, { shardCount: this.config.shardCount, cutoff: now - this.config.resultTtlS * 1000 });
  }

  /** When the history prune (`history-prune`) or snapshot (`history-snapshot`) runs next (epoch ms). */
  async nextHistoryRun(which: 'prune' | 'snapshot'): Promise<number | undefined> {
    return (await this.queue.getJobScheduler(which === 'prune' ? HISTORY_PRUNE : HISTORY_SNAPSHOT))?.next;
  }

  /** Deletes local history past HISTORY_RETENTION_DAYS (see `pruneHistory`); `now` for tests. */
  pruneHistory(now = Date.now()): HistoryPruneReport {
    const report = pruneHistory(this.config.dataDir, { now, retentionDays: this.config.historyRetentionDays });
    this.logger.info(report, 'pruned history past retention');
    return report;
  }

  /**
   * Drops the `as_of` moments kept under this machine's AGENTDB_DATA_DIR and unused for
   * AS_OF_KEEP_MINUTES (the scheduled `as-of-sweep`, every minute), as the history prune deletes
   * this machine's history; answers how many files went. `now` for tests.
   */
  sweepAsOf(now = Date.now()): number {
    const dropped = sweepMoments(this.config.dataDir, this.config.history?.asOfKeepMs ?? AS_OF_KEEP_DEFAULT_MS, now);
    if (dropped) this.logger.info({ dropped }, 'dropped kept as_of moments past their keep time');
    return dropped;
  }

  /** Asks every shard's owner for a new snapshot of each database changed since its last one. */
  async snapshotHistory(): Promise<{ databases: number; snapshots: number }> {
    const ops = new ShardOpClient({ redisUrl: this.config.redisUrl, prefix: this.config.prefix });
    const total = { databases: 0, snapshots: 0 };
    try {
      // All shards at once: a shard with no owner tonight must not hold up the others.
      const shards = Array.from({ length: this.config.shardCount }, (_, shard) => shard);
      const outs = await Promise.allSettled(shards.map((shard) => ops.run(shard, 'historySnapshot', {}, { timeoutMs: 3600_000 })));
      outs.forEach((o, shard) => {
        if (o.status === 'rejected' || !o.value.ok) {
          this.logger.warn(
            { shard, err: o.status === 'rejected' ? String(o.reason) : o.value.ok ? undefined : o.value.error.code },
            'history snapshot failed on a shard',
          );
          return;
        }
        const r = o.value.result as { databases: number; snapshots: number };
        total.databases += r.databases;
        total.snapshots += r.snapshots;
      });
    } finally {
      await ops.close();
    }
    this.logger.info(total, 'nightly history snapshots taken');
    return total;
  }

  /** One look for missing schedules at a time; a failed look is logged and tried again later. */
  private checkSchedules(): Promise<void> {
    this.checking ??= this.ensureSchedules()
      .then((added) => {
        if (added.length) this.logger.warn({ schedules: added }, 'job schedulers were missing (Redis lost them); registered them again');
      })
      .catch((err) => this.logger.warn({ err: String(err) }, 'could not check the job schedulers'))
      .finally(() => (this.checking = undefined));
    return this.checking;
  }

  /** Stops taking jobs and closes its connections; a second call waits for the first. */
  stop(): Promise<void> {
    this.stopping ??= this.close();
    return this.stopping;
  }

  private async close(): Promise<void> {
    clearInterval(this.checkTimer);
    this.redis.off('ready', this.onReady);
    if (this.worker) await closeWorker(this.worker);
    await this.queue.close();
    await this.blobs.close();
    // quit, not disconnect: it waits for replies still due instead of failing them.
    await Promise.all([this.redis, this.workerRedis].map((r) => r?.quit().catch(() => undefined)));
  }
}
