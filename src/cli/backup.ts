import { codeOf, errorBody, type ErrorCode } from '../errors.ts';
import { HISTORY_HINTS } from '../history/history-hints.ts';
import { runBackups } from '../shards/backups.ts';
import { checkRedis, connectAnswering } from '../redis/connection.ts';
import { keysFor } from '../redis/keys.ts';
import { BackupLog } from '../shards/backup-log.ts';
import { ShardOpClient } from '../shards/shard-op-client.ts';
import { parseDatabaseId } from '../contracts/database-id.ts';
import type { BackupProgress } from '../shards/ops/backup-op.ts';
import { UsageError, type CommandContext } from './context.ts';
import { exitFor, exitForAll } from './exit-status.ts';
import { pickupWatch } from './op-pickup.ts';

/**
 * `agentdb backup now [--db DB]`: backs up every database (or DB) at once, on each shard's
 * owner, as the nightly job does. A line per database on stderr as each is done; the run's
 * report as JSON on stdout. Exit 1 when any shard failed, or any database's backup is short of now
 * (failed, damaged segments left out, or no fresh snapshot taken); 3 instead when each of those
 * failures may pass later (`exitForAll`: a full disk, a shard nobody took).
 */
export async function backupNow(ctx: CommandContext, flags: { db?: string }): Promise<number> {
  if (flags.db !== undefined) {
    try {
      parseDatabaseId(flags.db);
    } catch {
      throw new UsageError(`--db must be a database id, <workspace> or <workspace>/<agent>, not ${JSON.stringify(flags.db)}`);
    }
  }
  await checkRedis(ctx.config.redisUrl);
  const redis = await connectAnswering(ctx.config.redisUrl, { name: 'agentdb-cli' });
  const ops = new ShardOpClient({ redisUrl: ctx.config.redisUrl, prefix: ctx.config.prefix });
  const started = Date.now();
  // One op per shard: say once that none is being taken, not once per shard.
  const watch = pickupWatch(ctx, 'backup now');
  let noted = false;
  const pickup = {
    ...watch,
    onUnclaimed: (waited: number) => {
      if (!noted) watch.onUnclaimed?.(waited);
      noted = true;
    },
  };
  const say = ({ shard, done, total, report: r }: BackupProgress) => {
    const what = r.error
      ? `FAILED ${r.error.code}: ${r.error.detail}`
      : r.unchanged
        ? 'unchanged'
        : `${r.files} files, ${(r.bytes / 1024 / 1024).toFixed(1)} MB uploaded and verified`;
    const left = r.damaged ? `; DAMAGED, not uploaded (nor the rest of their generation): ${r.damaged.join(', ')}` : '';
    const behind = r.snapshot
      ? `; NO FRESH SNAPSHOT (${r.snapshot.code}: ${r.snapshot.detail}): the commits since its last closed segment are in no backup yet`
      : '';
    ctx.stderr.write(`shard ${shard} ${done}/${total} ${r.database}: ${what}${left}${behind}\n`);
  };
  try {
    const run = await runBackups(ops, ctx.config.shardCount, {
      ...(flags.db !== undefined ? { db: flags.db } : {}),
      reason: 'manual',
      pickup,
      log: new BackupLog(redis, keysFor(ctx.config.prefix)),
      // runBackups tells of every database once, its event missed or not.
      onProgress: say,
    });
    // A database's refusal as every other coded error reads: its message and hint beside the code.
    const databases = run.databases.map((d) => ({
      ...d,
      ...(d.error ? { error: errorBody(d.error.code, d.error.detail, HISTORY_HINTS) } : {}),
      ...(d.snapshot ? { snapshot: errorBody(d.snapshot.code, d.snapshot.detail, HISTORY_HINTS) } : {}),
    }));
    const failed = run.failed.map((f) => ({ shard: f.shard, ...errorBody(f.code, f.detail, HISTORY_HINTS) }));
    ctx.stdout.write(`${JSON.stringify({ ...run, databases, failed, ms: Date.now() - started })}\n`);
    // Damaged segments are HISTORY_CORRUPT's: a backup run again leaves them out again.
    const failures: ErrorCode[] = [
      ...run.failed.map((f) => f.code),
      ...run.databases.flatMap((d) => [d.error?.code, d.snapshot?.code, d.damaged ? ('HISTORY_CORRUPT' as const) : undefined]),
    ].filter((c): c is ErrorCode => c !== undefined);
    return exitForAll(failures.map((code) => ({ code })));
  } catch (err) {
    const code = codeOf(err);
    if (!code || code === 'INTERNAL') throw err;
    // As `restore` and `history` answer theirs: the coded error as JSON on stdout.
    ctx.stdout.write(`${JSON.stringify({ error: errorBody(code, (err as { detail?: string }).detail, HISTORY_HINTS) })}\n`);
    return exitFor(code);
  } finally {
    await ops.close();
    redis.disconnect();
  }
}
