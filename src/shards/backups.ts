import { AgentDbError, codeOf, type ErrorCode } from '../errors.ts';
import type { BackupReport } from '../history/backup.ts';
import { shardOf } from '../contracts/database-id.ts';
import type { BackupProgress, ShardBackupResult } from './ops/backup-op.ts';
import type { PickupWatch, ShardOpClient } from './shard-op-client.ts';
import type { BackupLog } from './backup-log.ts';

/** What a backup run did, over every shard it reached. */
export interface BackupRun {
  databases: BackupReport[];
  /** Shards whose backup failed, with why (the others still ran). */
  failed: { shard: number; code: ErrorCode; detail: string }[];
}

/**
 * Backs up every shard (or only the shard of `db`), each on its owner as shard op `backup`,
 * all at once: each owner uploads its own files. `onProgress` hears each database as it is done.
 * `reason` names the snapshots it begins (`manual` for `agentdb backup now`; nightly by default).
 */
export async function runBackups(
  ops: ShardOpClient,
  shardCount: number,
  opts: {
    db?: string;
    timeoutMs?: number;
    onProgress?: (p: BackupProgress) => void;
    pickup?: PickupWatch;
    reason?: 'nightly' | 'manual';
    /** Where each shard's run is recorded (`agentdb backups`, `/metrics`); a run of one database (`db`) is not. */
    log?: BackupLog;
  } = {},
): Promise<BackupRun> {
  const shards = opts.db !== undefined ? [shardOf(opts.db, shardCount)] : Array.from({ length: shardCount }, (_, i) => i);
  const run: BackupRun = { databases: [], failed: [] };
  await Promise.all(
    shards.map(async (shard) => {
      const startedAt = Date.now();
      let reports: BackupReport[] = [];
      let error: { code: ErrorCode; detail: string } | undefined;
      try {
        const args = { ...(opts.db !== undefined ? { db: opts.db } : {}), ...(opts.reason === 'manual' ? { reason: 'manual' } : {}) };
        const outcome = await ops.run(shard, 'backup', args, {
          timeoutMs: opts.timeoutMs ?? 6 * 3600 * 1000,
          ...(opts.onProgress ? { onProgress: (p) => opts.onProgress!(p as BackupProgress) } : {}),
          ...(opts.pickup ? { pickup: opts.pickup } : {}),
        });
        if (outcome.ok) reports = (outcome.result as ShardBackupResult).databases;
        else error = outcome.error;
      } catch (err) {
        error = { code: codeOf(err) ?? 'UNAVAILABLE', detail: (err as { detail?: string }).detail ?? (err as Error).message };
      }
      run.databases.push(...reports);
      if (error) run.failed.push({ shard, ...error });
      if (opts.log && opts.db === undefined) {
        await opts.log
          .record({
            shard,
            startedAt,
            endedAt: Date.now(),
            reason: opts.reason ?? 'nightly',
            databases: reports.length,
            failedDatabases: reports.filter((r) => r.error || r.damaged).length,
            bytes: reports.reduce((n, r) => n + r.bytes, 0),
            ...(error ? { error } : {}),
          })
          // The run's own outcome is reported to its caller whatever the log does.
          .catch(() => undefined);
      }
    }),
  );
  run.databases.sort((a, b) => (a.database < b.database ? -1 : 1));
  if (opts.db !== undefined && run.failed.length) throw new AgentDbError(run.failed[0]!.code, run.failed[0]!.detail);
  return run;
}
