// Point-in-time history, blob backups and the blob store, and the schedules that run them (and
// the nightly maintenance). A part of the one schema (see src/config.ts): each variable's entry,
// its Config field and their mapping, together.

import path from 'node:path';
import { z } from 'zod';
import { cronSetting, int, timeZoneSetting } from './env-checks.ts';

const historyBackupsSchema = z.object({
  /** When the maintenance job runs (cron, in SCHEDULE_TZ). */
  MAINTENANCE_CRON: cronSetting('17 3 * * *'),
  SCHEDULE_TZ: timeZoneSetting(),
  /** Where backups and offloaded results go: `folder` (BLOB_DIR) or `s3` (the S3_* keys). */
  BLOB_STORE: z.enum(['folder', 's3']).default('folder'),
  /** The folder store's root. Default: `<AGENTDB_DATA_DIR>/blobs`. */
  BLOB_DIR: z.string().min(1).optional(),
  /** An S3-compatible endpoint (MinIO, R2, …); AWS itself when unset. */
  S3_ENDPOINT: z.url().optional(),
  S3_BUCKET: z
    .string()
    .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'not an S3 bucket name')
    .optional(),
  S3_REGION: z.string().min(1).default('us-east-1'),
  S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  S3_FORCE_PATH_STYLE: z.stringbool().default(false),
  /** When the nightly backup runs (cron, in BACKUP_TZ). */
  BACKUP_CRON: cronSetting('0 2 * * *'),
  BACKUP_TZ: timeZoneSetting(),
  /** Point-in-time history of every database (`off` only to measure what it costs). */
  HISTORY_CAPTURE: z.enum(['on', 'off']).default('on'),
  /** Days of history kept: restores reach this far back, and the prune deletes what is older. */
  HISTORY_RETENTION_DAYS: int(1, 10_000, 30),
  /** A database's WAL is checkpointed once it passes this size (after its frames were copied). */
  HISTORY_CHECKPOINT_BYTES: int(4096, 1024 * 1024 * 1024, 4 * 1024 * 1024),
  /** A database's history quota in bytes; 0: ten times its plan's database size. */
  HISTORY_MAX_BYTES_PER_DB: int(0, Number.MAX_SAFE_INTEGER, 0),
  /**
   * How far a database's WAL may run ahead of a history whose copies fail before its writes
   * answer STORAGE_FULL (its commits stay in the WAL, never checkpointed before they are copied).
   */
  HISTORY_MAX_BEHIND_BYTES: int(64 * 1024, 16 * 1024 * 1024 * 1024, 64 * 1024 * 1024),
  /** How long a moment a read's `as_of` restored is kept unused before it is dropped (minutes). */
  AS_OF_KEEP_MINUTES: int(1, 7 * 24 * 60, 15),
  /** When each database with commits since its last snapshot gets a new one (cron, in SCHEDULE_TZ). */
  HISTORY_SNAPSHOT_CRON: cronSetting('30 1 * * *'),
  /** When history past HISTORY_RETENTION_DAYS is deleted (cron, in SCHEDULE_TZ). */
  HISTORY_PRUNE_CRON: cronSetting('47 3 * * *'),
});

/** This part's entries of the environment's schema, which `loadConfig` joins. */
export const historyBackupsEnv = historyBackupsSchema.shape;

/** This part's fields of the frozen `Config`. */
export interface HistoryBackupsConfig {
  /** MAINTENANCE_CRON: when the nightly prune of usage and finished approvals runs (in `scheduleTz`). */
  readonly maintenanceCron: string;
  /** SCHEDULE_TZ: the time zone of the prune and history crons. */
  readonly scheduleTz: string;
  /** Where backups and offloaded results go (BLOB_STORE and its keys). Holds a secret: never logged. */
  readonly blob: BlobConfig;
  /** BACKUP_CRON: when the nightly blob backup runs (in `backupTz`). */
  readonly backupCron: string;
  /** BACKUP_TZ: the backup cron's time zone. */
  readonly backupTz: string;
  /** Capture on: what executor children are started with; undefined with HISTORY_CAPTURE=off. */
  readonly history?: {
    readonly checkpointBytes: number;
    readonly retentionDays: number;
    readonly maxBytesPerDb: number;
    readonly maxBehindBytes: number;
    /** AS_OF_KEEP_MINUTES in ms. */
    readonly asOfKeepMs: number;
  };
  /** HISTORY_RETENTION_DAYS: how far back restores reach; the history prune deletes what is older. */
  readonly historyRetentionDays: number;
  /** HISTORY_SNAPSHOT_CRON: when each database changed since its last snapshot gets a new one. */
  readonly historySnapshotCron: string;
  /** HISTORY_PRUNE_CRON: when local history past `historyRetentionDays` is deleted. */
  readonly historyPruneCron: string;
}

/** The blob store's configuration: a folder (BLOB_DIR, default `<data>/blobs`) or an S3 bucket. */
export type BlobConfig =
  | { kind: 'folder'; dir?: string }
  | {
      kind: 's3';
      s3: { bucket: string; region: string; endpoint?: string; accessKeyId?: string; secretAccessKey?: string; forcePathStyle: boolean };
    };

/** This part's fields of `Config`, from its variables as validated. */
export function historyBackupsConfig(e: z.infer<typeof historyBackupsSchema>): HistoryBackupsConfig {
  return {
    maintenanceCron: e.MAINTENANCE_CRON,
    scheduleTz: e.SCHEDULE_TZ,
    blob: blobConfig(e),
    backupCron: e.BACKUP_CRON,
    backupTz: e.BACKUP_TZ,
    ...(e.HISTORY_CAPTURE === 'on'
      ? {
          history: Object.freeze({
            checkpointBytes: e.HISTORY_CHECKPOINT_BYTES,
            retentionDays: e.HISTORY_RETENTION_DAYS,
            maxBytesPerDb: e.HISTORY_MAX_BYTES_PER_DB,
            maxBehindBytes: e.HISTORY_MAX_BEHIND_BYTES,
            asOfKeepMs: e.AS_OF_KEEP_MINUTES * 60_000,
          }),
        }
      : {}),
    historyRetentionDays: e.HISTORY_RETENTION_DAYS,
    historySnapshotCron: e.HISTORY_SNAPSHOT_CRON,
    historyPruneCron: e.HISTORY_PRUNE_CRON,
  };
}

function blobConfig(e: z.infer<typeof historyBackupsSchema>): BlobConfig {
  if (e.BLOB_STORE === 'folder') return { kind: 'folder', ...(e.BLOB_DIR ? { dir: path.resolve(e.BLOB_DIR) } : {}) };
  return {
    kind: 's3',
    s3: {
      bucket: e.S3_BUCKET!,
      region: e.S3_REGION,
      forcePathStyle: e.S3_FORCE_PATH_STYLE,
      ...(e.S3_ENDPOINT ? { endpoint: e.S3_ENDPOINT } : {}),
      ...(e.S3_ACCESS_KEY_ID ? { accessKeyId: e.S3_ACCESS_KEY_ID } : {}),
      ...(e.S3_SECRET_ACCESS_KEY ? { secretAccessKey: e.S3_SECRET_ACCESS_KEY } : {}),
    },
  };
}
