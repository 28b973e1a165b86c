import { AgentDbError, codeOf } from '../../errors.ts';
import { backupDatabase, type BackupReport } from '../../history/backup.ts';
import { openBlobStore } from '../../blobs/blob-stores.ts';
import { historyDatabases } from '../../history/history-files.ts';
import { databasePath, shardOf } from '../../contracts/database-id.ts';
import type { DbTarget } from '../../executor/executor-protocol.ts';
import { planLimits } from '../../policy/plan-limits.ts';
import { isDiskFull } from '../../sqlite/sqlite-errors.ts';
import type { ShardOpHandler } from './shard-ops.ts';

/** The progress a backup op reports per database (BullMQ job progress, read by `agentdb backup now`). */
export interface BackupProgress {
  shard: number;
  done: number;
  total: number;
  report: BackupReport;
}

/** A whole shard's backup: what each of its databases uploaded. */
export interface ShardBackupResult {
  shard: number;
  databases: BackupReport[];
}

/** Snapshots may copy a large file; they get this long, not a statement's time. */
const SNAPSHOT_TIMEOUT_MS = 30 * 60 * 1000;

/**
 * Shard op `backup` (args `{ db?: string, reason?: 'manual' }`): on the shard's owner, for each database of the
 * shard that has history (or just `db`), a fresh snapshot first (a new generation, which closes
 * every segment before it; skipped by the child when nothing was committed since the last),
 * then `backupDatabase` uploads and verifies what the blob store lacks. The snapshot runs as an
 * executor request, ordered with the database's statements; the upload reads only files that
 * no longer change.
 */
export const backupOp: ShardOpHandler = async (data, ctx) => {
  const { config, shard, executor, job, logger } = ctx;
  const wanted = (data.args as { db?: unknown } | undefined)?.db;
  if (wanted !== undefined && typeof wanted !== 'string') throw new AgentDbError('INVALID_ARGUMENTS', 'db must be a database id');
  const reason = (data.args as { reason?: unknown } | undefined)?.reason === 'manual' ? 'manual' : 'nightly';
  const ids = historyDatabases(config.dataDir).filter((id) => shardOf(id, config.shardCount) === shard && (wanted === undefined || id === wanted));
  if (wanted !== undefined && ids.length === 0) throw new AgentDbError('NOT_FOUND', `${wanted} has no history on shard ${shard} to back up`);
  const store = openBlobStore(config);
  const result: ShardBackupResult = { shard, databases: [] };
  try {
    for (const id of ids) {
      const [workspace, agent] = id.split('/');
      const db: DbTarget = { id, path: databasePath(config.dataDir, workspace!, agent, shard), shard, limits: planLimits('pro') };
      const snap = await executor.run({ op: 'snapshot', db, reason, timeoutMs: SNAPSHOT_TIMEOUT_MS });
      // A failed snapshot (a restore reading the history, say) still leaves closed segments to copy.
      if (!snap.ok) logger.warn({ database: id, code: snap.error.code }, 'backup: no fresh snapshot');
      let report: BackupReport;
      try {
        report = await backupDatabase(store, config.dataDir, id);
      } catch (err) {
        // One database's damaged file, or a fault on it (ENOSPC, EIO, the store refusing one
        // upload), must not cost the other databases of the shard their backup: it is reported
        // for that database and the next run tries it again. A full disk is STORAGE_FULL
        // (retryable, the operator frees space); other uncoded faults INTERNAL.
        const code = codeOf(err) ?? (isDiskFull(err) ? 'STORAGE_FULL' : 'INTERNAL');
        const detail = (err as { detail?: string }).detail ?? String((err as Error)?.message ?? err).slice(0, 500);
        logger.error({ database: id, code, detail }, 'backup of a database failed');
        report = { database: id, files: 0, bytes: 0, unchanged: false, error: { code, detail } };
      }
      if (!snap.ok && !report.error) report.snapshot = { code: snap.error.code, detail: snap.error.detail };
      if (report.damaged) logger.error({ database: id, damaged: report.damaged }, 'backup: damaged segments left out (not uploaded)');
      result.databases.push(report);
      await job.updateProgress({ shard, done: result.databases.length, total: ids.length, report } satisfies BackupProgress);
    }
  } finally {
    await store.close();
  }
  logger.info({ databases: result.databases.length, files: result.databases.reduce((n, r) => n + r.files, 0) }, 'backup done');
  return result;
};
