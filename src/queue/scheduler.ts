import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import { connectRedis } from './connection.ts';
import { keysFor, type Keys } from './keys.ts';
import { pruneRedis } from './maintenance.ts';
import type { BlobStore } from '../history/blob-store.ts';
import { openBlobStore } from '../history/blob-stores.ts';
import { OffloadedResults } from '../history/offloaded-results.ts';
import { pruneBlobBackups } from '../history/blob-prune.ts';
import { runBackups } from './backups.ts';
import { ShardOpClient } from './shard-op-client.ts';

const QUEUE = '{maintenance}';
const PRUNE = 'prune';
const BACKUP = 'backup';

/**
 * agentdb's scheduled work, on a BullMQ job scheduler (cron and time zone from the config):
 * today the nightly prune of Redis past its retention. Any number of processes may run it;
 * BullMQ makes one job per tick and one worker takes it.
 */
export class Scheduler {
  private readonly keys: Keys;
  private readonly redis: Redis;
  private readonly queue: Queue;
  private readonly blobs: BlobStore;
  private worker?: Worker;

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
  ) {
    this.keys = keysFor(config.prefix);
    this.redis = connectRedis(config.redisUrl, { blocking: true, name: 'agentdb-scheduler' });
    this.queue = new Queue(QUEUE, { connection: this.redis, prefix: this.keys.bullPrefix });
    this.blobs = openBlobStore(config);
  }

  /** Registers the schedules (idempotent) and starts taking their jobs. */
  async start(): Promise<void> {
    await this.queue.upsertJobScheduler(
      PRUNE,
      { pattern: this.config.maintenanceCron, tz: this.config.scheduleTz },
      { name: PRUNE, opts: { removeOnComplete: { count: 30 }, removeOnFail: { count: 30 } } },
    );
    // Nightly: each shard owner snapshots and uploads its databases' history (see `backupOp`).
    await this.queue.upsertJobScheduler(
      BACKUP,
      { pattern: this.config.backupCron, tz: this.config.backupTz },
      { name: BACKUP, opts: { removeOnComplete: { count: 30 }, removeOnFail: { count: 30 } } },
    );
    this.worker = new Worker(QUEUE, (job) => (job.name === BACKUP ? this.backup() : this.prune()), { connection: this.redis, prefix: this.keys.bullPrefix, concurrency: 1 });
    this.worker.on('error', (err) => this.logger.error({ err: String(err) }, 'scheduler worker error'));
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
      const run = await runBackups(ops, this.config.shardCount);
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
    const results = await new OffloadedResults(this.blobs, { dataDir: this.config.dataDir, ttlS: this.config.resultTtlS, now: () => now }).prune();
    const backups = await pruneBlobBackups(this.blobs, { retentionDays: this.config.historyRetentionDays, now });
    this.logger.info({ ...report, results, backups }, 'pruned past retention');
    return { ...report, results, backups: backups.generations };
  }

  async stop(): Promise<void> {
    await this.worker?.close();
    await this.queue.close();
    await this.blobs.close();
    this.redis.disconnect();
  }
}
