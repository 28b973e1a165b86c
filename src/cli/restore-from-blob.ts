import { codeOf } from '../errors.ts';
import { checkRedis } from '../queue/connection.ts';
import { ShardOpClient } from '../queue/shard-op-client.ts';
import { parseDatabaseId, shardOf } from '../store/database-id.ts';
import { EXIT, UsageError, type CommandContext } from './context.ts';

/** A moment on the command line: an ISO time, or unix seconds. */
export function parseMoment(flag: string, value: string): number {
  const ms = /^\d+(\.\d+)?$/.test(value) ? Number(value) * 1000 : Date.parse(value);
  if (!Number.isFinite(ms)) throw new UsageError(`${flag} takes an ISO time (2026-11-30T14:05:00Z) or unix seconds, not ${JSON.stringify(value)}`);
  return ms;
}

/**
 * `agentdb restore DB --from-blob [--at TIME]`: rebuilds DB, which must not exist here (a new
 * machine, an empty data folder), from the blob store alone, on its shard's owner; every file
 * is checked against the manifest's sha256 and the result against `PRAGMA integrity_check`.
 * Without --at: the latest moment backed up. Prints what was restored as JSON.
 */
export async function restoreFromBlobCommand(ctx: CommandContext, flags: { at?: string; timeout?: number }, db: string): Promise<number> {
  try {
    parseDatabaseId(db);
  } catch {
    throw new UsageError(`DB must be a database id, <workspace> or <workspace>/<agent>, not ${JSON.stringify(db)}`);
  }
  const at = flags.at === undefined ? undefined : parseMoment('--at', flags.at);
  await checkRedis(ctx.config.redisUrl);
  const ops = new ShardOpClient({ redisUrl: ctx.config.redisUrl, prefix: ctx.config.prefix });
  try {
    const outcome = await ops.run(shardOf(db, ctx.config.shardCount), 'restoreFromBlob', at === undefined ? {} : { at }, {
      db,
      timeoutMs: (flags.timeout ?? 3600) * 1000,
    });
    if (!outcome.ok) {
      ctx.stderr.write(`agentdb restore: ${outcome.error.code}: ${outcome.error.detail}\n`);
      return EXIT.failed;
    }
    ctx.stdout.write(`${JSON.stringify(outcome.result)}\n`);
    return EXIT.ok;
  } catch (err) {
    if (codeOf(err)) throw err;
    ctx.stderr.write(`agentdb restore: no worker finished the restore: ${(err as Error).message}\n`);
    return EXIT.failed;
  } finally {
    await ops.close();
  }
}
