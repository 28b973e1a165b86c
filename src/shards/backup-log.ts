import type { Redis } from 'ioredis';
import type { ErrorCode } from '../errors.ts';
import type { Keys } from '../redis/keys.ts';

/** One shard's backup run, as `agentdb backups` and `/metrics` show it. */
export interface ShardBackupRecord {
  shard: number;
  /** When the run began and ended (epoch ms). */
  startedAt: number;
  endedAt: number;
  reason: 'nightly' | 'manual';
  /** Databases backed up, and those among them whose upload failed. */
  databases: number;
  failedDatabases: number;
  /** Bytes uploaded. */
  bytes: number;
  /** Why the shard's run failed as a whole (no owner, Redis gone), when it did. */
  error?: { code: ErrorCode; detail: string };
}

/** What the log holds of one shard: its last run, and its last run that failed nothing. */
export interface ShardBackupState {
  shard: number;
  last?: ShardBackupRecord;
  lastOk?: ShardBackupRecord;
}

/**
 * Each shard's last backup run and last successful one, in Redis: written by whoever ran the
 * backup (the nightly scheduler, `agentdb backup now`), read by `agentdb backups` and `/metrics`.
 * Before, nothing showed whether last night's backup ran, nor its failures.
 */
export class BackupLog {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  /** Records a shard's run; a run that failed nothing is its last success too. */
  async record(rec: ShardBackupRecord): Promise<void> {
    const text = JSON.stringify(rec);
    const fields: Record<string, string> = { [`last:${rec.shard}`]: text };
    if (!rec.error && rec.failedDatabases === 0) fields[`ok:${rec.shard}`] = text;
    await this.redis.hset(this.keys.backupRuns, fields);
  }

  /** Every shard's state, shards 0 to `shardCount - 1`. */
  async read(shardCount: number): Promise<ShardBackupState[]> {
    const all = await this.redis.hgetall(this.keys.backupRuns);
    const parse = (raw: string | undefined) => (raw === undefined ? undefined : (JSON.parse(raw) as ShardBackupRecord));
    return Array.from({ length: shardCount }, (_, shard) => {
      const last = parse(all[`last:${shard}`]);
      const lastOk = parse(all[`ok:${shard}`]);
      return { shard, ...(last ? { last } : {}), ...(lastOk ? { lastOk } : {}) };
    });
  }
}
