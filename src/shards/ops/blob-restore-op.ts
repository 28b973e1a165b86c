import path from 'node:path';
import { AgentDbError, codeOf } from '../../errors.ts';
import { withFullDisk } from '../../history/full-disk-where.ts';
import { isDiskFull } from '../../sqlite/sqlite-errors.ts';
import { openBlobStore } from '../../blobs/blob-stores.ts';
import { checkForkTarget } from '../../history/fork-target.ts';
import { restoreFromBlob } from '../../history/blob-restore.ts';
import { localSource } from '../../history/history-files.ts';
import { databaseId, databasePath, parseDatabaseId, shardOf } from '../../contracts/database-id.ts';
import type { RestoreActor } from '../../executor/executor-protocol.ts';
import { auditInto } from '../../history/restore-audit.ts';
import { PLAN_LIMITS } from '../../policy/plan-limits.ts';
import type { ShardOpHandler } from './shard-ops.ts';

/** Where the moment begins in the audit statement of a restore made before it led with the moment. */
const AS_OF = ' as of ';

/**
 * The moment a blob restore's audit statement names, or undefined: its first words after
 * "restore to", or, in a row written by an older build, its last words after "as of".
 */
function restoredAsOf(statement: string): number | undefined {
  const led = /^restore to (\S+) /.exec(statement)?.[1];
  const at = Date.parse(led ?? statement.slice(statement.lastIndexOf(AS_OF) + AS_OF.length));
  return Number.isFinite(at) ? at : undefined;
}

/**
 * Shard op `restoreFromBlob` (db: the database to create, args `{ at?: number` epoch ms,
 * `source?:` the database whose backup to read when another, `by?:` who asks, `dryRun?` `}`): on the
 * shard's owner, rebuilds a database that does not exist here from the blob store alone (see
 * `restoreFromBlob`), with the restore's row in its audit. On the owner, because it creates the
 * database's file, and no other process may.
 */
export const blobRestoreOp: ShardOpHandler = async (data, ctx) => {
  const { config, shard } = ctx;
  if (typeof data.db !== 'string') throw new AgentDbError('INVALID_ARGUMENTS', 'a disaster restore names its database');
  const { workspace, agent } = parseDatabaseId(data.db);
  // The file is created on this shard's folder and checked for there: a database of another
  // shard (an op sent straight through Redis) would be "restored" beside its live file, unseen.
  const owner = shardOf(databaseId(workspace, agent), config.shardCount);
  if (owner !== shard) throw new AgentDbError('INVALID_ARGUMENTS', `database ${data.db} belongs to shard ${owner}, not ${shard}`);
  const args = (data.args ?? {}) as { at?: unknown; source?: unknown; by?: Partial<RestoreActor>; dryRun?: unknown };
  const { at } = args;
  if (at !== undefined && (typeof at !== 'number' || !Number.isFinite(at))) throw new AgentDbError('INVALID_ARGUMENTS', 'at must be a time in epoch ms');
  if (args.source !== undefined && typeof args.source !== 'string') throw new AgentDbError('INVALID_ARGUMENTS', 'source must be a database id');
  const source = (args.source as string | undefined) ?? data.db;
  if (source !== data.db) checkForkTarget(source, data.db);
  const what = `restore from the blob store of ${source} into ${data.db}`;
  // A fork from the blob store counts against the workspace's quotas as any fork does; a disaster
  // restore in place brings back a database the workspace had, and is not refused for room.
  if (source !== data.db && args.dryRun !== true && ctx.quota) await ctx.quota.check(workspace, { databases: 1, bytes: 0 }, what);
  // Weighed again once planned, with the bytes it adds (see `blobRestoreAdds`); a dry run says so.
  // Held until it is done, as a restore's are: checked alone, two forks at once that fit only one
  // by one both passed, and neither counted a restore's room held meanwhile (hostile review T5).
  let release: (() => void) | undefined;
  const room = async (bytes: number, dryRun: boolean): Promise<string | undefined> => {
    if (!ctx.quota) return undefined;
    const held = await ctx.quota.holdOrRefusal(workspace, { databases: 1, bytes }, what, dryRun);
    release = held.release;
    return held.refused;
  };
  const by: RestoreActor = { who: typeof args.by?.who === 'string' ? args.by.who : 'operator', via: 'operator' };
  const dbPath = databasePath(config.dataDir, workspace, agent, shard);
  // The restore's audit row is keyed by its op's job: a run of the job again (BullMQ, once the
  // first run's lock was lost: its worker SIGKILLed, Redis restarted) finds the database its first
  // run placed and answers that restore, where it answered DATABASE_EXISTS "nothing was changed"
  // (as F6 found for a restore --into); a database made by another op is still refused.
  const auditId = `${data.db}:${ctx.job.id ?? Date.now()}`;
  const again = args.dryRun !== true && ctx.job.id !== undefined && (ctx.job.attemptsStarted ?? 0) > 1;
  const madeBefore = async (): Promise<number | undefined> => {
    const target = { id: data.db as string, path: dbPath, shard, limits: PLAN_LIMITS.enterprise };
    const outcome = await ctx.executor.run({ op: 'restoreAudited', db: target, id: auditId });
    if (!outcome.ok) throw new AgentDbError(outcome.error.code, outcome.error.detail);
    const { statement } = outcome.result as { statement: string | null };
    return statement === null ? undefined : restoredAsOf(statement);
  };
  const store = openBlobStore(config);
  try {
    return await restoreFromBlob(store, {
      id: source,
      ...(source !== data.db ? { into: data.db } : {}),
      ...(args.dryRun === true ? { dryRun: true } : {}),
      ...(source !== data.db && ctx.quota ? { room } : {}),
      dbPath,
      ...(again ? { madeBefore } : {}),
      workDir: path.join(config.dataDir, 'tmp'),
      ...(at !== undefined ? { at } : {}),
      beforePlace: (file, restoredTo, at) =>
        // The moment first, as an in-place restore's entry says it: the activity table cuts a long
        // statement, and the store's path pushed the moment out of sight (session 36, N14).
        auditInto(file, by, auditId, `restore to ${new Date(restoredTo).toISOString()} from the backup of ${source} in ${store.name}`, at),
      history: localSource(config.dataDir, data.db),
    });
  } catch (err) {
    throw whichDiskFull(err, config.dataDir, { id: data.db, path: dbPath });
  } finally {
    release?.();
    await store.close();
  }
};

/**
 * A refusal for room, named as a restore in place's is (which disk, its folders: an operator's
 * restore): the op's ENOSPC reached its caller as the registry's generic "The server's disk is
 * full" with the raw error, no executor child's `withFullDisk` on its way (F18's leftover). Its
 * work folder (AGENTDB_DATA_DIR/tmp) is on the databases' disk. Anything else is thrown as it was.
 */
function whichDiskFull(err: unknown, dataDir: string, db: { id: string; path: string }): unknown {
  const full = codeOf(err) === 'STORAGE_FULL' || isDiskFull(err) || (err as { code?: unknown } | null)?.code === 'SQLITE_FULL';
  if (!full) return err;
  const detail = err instanceof AgentDbError ? (err.detail ?? err.message) : err instanceof Error ? err.message : String(err);
  return new AgentDbError('STORAGE_FULL', withFullDisk(detail, dataDir, db));
}
