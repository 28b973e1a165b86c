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
 * A shard's progress told once per database. The progress comes as BullMQ events beside the
 * op's outcome, and an op done at once (a database with nothing new) could end before its event
 * was read (seen missing once in CI): at the end each database not yet told of is told from the
 * outcome, at its place in the shard's order, and a late event is ignored.
 */
export class ShardProgress {
  private readonly told = new Set<string>();
  private ended = false;

  constructor(
    private readonly shard: number,
    private readonly onProgress: (p: BackupProgress) => void,
  ) {}

  /** An event of the op's, told unless its database was told of or the op has ended. */
  heard(p: BackupProgress): void {
    if (this.ended || this.told.has(p.report.database)) return;
    this.told.add(p.report.database);
    this.onProgress(p);
  }

  /** The op's outcome: each of its databases not yet told of is told now; later events are not. */
  end(reports: BackupReport[]): void {
    this.ended = true;
    reports.forEach((report, i) => {
      if (this.told.has(report.database)) return;
      this.told.add(report.database);
      this.onProgress({ shard: this.shard, done: i + 1, total: reports.length, report });
    });
  }
}

/**
 * Backs up every shard (or only the shard of `db`), each on its owner as shard op `backup`,
 * all at once: each owner uploads its own files. `onProgress` hears each database once, as it
 * is done or, its event missed, when its shard's op ends ({@link ShardProgress}).
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
      const progress = opts.onProgress && new ShardProgress(shard, opts.onProgress);
      try {
        const args = { ...(opts.db !== undefined ? { db: opts.db } : {}), ...(opts.reason === 'manual' ? { reason: 'manual' } : {}) };
        const outcome = await ops.run(shard, 'backup', args, {
          timeoutMs: opts.timeoutMs ?? 6 * 3600 * 1000,
          ...(progress ? { onProgress: (p) => progress.heard(p as BackupProgress) } : {}),
          ...(opts.pickup ? { pickup: opts.pickup } : {}),
        });
        if (outcome.ok) reports = (outcome.result as ShardBackupResult).databases;
        else error = outcome.error;
      } catch (err) {
        error = { code: codeOf(err) ?? 'UNAVAILABLE', detail: (err as { detail?: string }).detail ?? (err as Error).message };
      }
      progress?.end(reports);
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
            failedDatabases: reports.filter((r) => r.error || r.damaged || r.snapshot).length,
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
