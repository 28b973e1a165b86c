import { errorBody } from '../errors.ts';
import { checkRedis } from '../queue/connection.ts';
import { parseMoment } from '../queue/history-client.ts';
import { ShardOpClient } from '../queue/shard-op-client.ts';
import { parseDatabaseId, shardOf } from '../store/database-id.ts';
import { EXIT, UsageError, type CommandContext } from './context.ts';

/**
 * `agentdb restore DB --from-blob [--at TIME]`: rebuilds DB, which must not exist here (a new
 * machine, an empty data folder), from the blob store alone, on its shard's owner; every file
 * is checked against the manifest's sha256 and the result against `PRAGMA integrity_check`.
 * Without --at: the latest moment backed up. Prints what was restored as JSON, or
 * `{"error": …}` (exit 1) as `agentdb restore` does.
 */
export async function restoreFromBlobCommand(ctx: CommandContext, flags: { at?: string }, db: string): Promise<number> {
  try {
    parseDatabaseId(db);
  } catch {
    throw new UsageError(`DB must be a database id, <workspace> or <workspace>/<agent>, not ${JSON.stringify(db)}`);
  }
  let at: number | undefined;
  try {
    at = flags.at === undefined ? undefined : parseMoment(flags.at);
  } catch (err) {
    throw new UsageError(`--at: ${(err as { detail?: string }).detail ?? String(err)}`);
  }
  await checkRedis(ctx.config.redisUrl);
  const ops = new ShardOpClient({ redisUrl: ctx.config.redisUrl, prefix: ctx.config.prefix });
  try {
    // A restore downloads and verifies a whole generation: it gets an hour, not a statement's time.
    const outcome = await ops.run(shardOf(db, ctx.config.shardCount), 'restoreFromBlob', at === undefined ? {} : { at }, { db, timeoutMs: 3600_000 });
    if (!outcome.ok) {
      ctx.stdout.write(`${JSON.stringify({ error: errorBody(outcome.error.code, outcome.error.detail) })}\n`);
      return EXIT.failed;
    }
    ctx.stdout.write(`${JSON.stringify(outcome.result)}\n`);
    return EXIT.ok;
  } finally {
    await ops.close();
  }
}
