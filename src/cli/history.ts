import os from 'node:os';
import { codeOf, errorBody } from '../errors.ts';
import { HISTORY_HINTS } from '../history/history-hints.ts';
import { checkRedis, connectRedis } from '../redis/connection.ts';
import { keysFor } from '../redis/keys.ts';
import { AgentRegistry } from '../registry/agents.ts';
import type { BlobRestoreResult } from '../history/blob-restore.ts';
import { HistoryClient, parseMoment, type HistoryView } from '../shards/history-client.ts';
import { ShardOpClient } from '../shards/shard-op-client.ts';
import { UsageError, type CommandContext } from './context.ts';
import { exitFor } from './exit-status.ts';
import { pickupWatch } from './op-pickup.ts';
import { parseDatabaseId } from '../contracts/database-id.ts';
import { nameFlag } from './name-flag.ts';
import { restoreAll } from './restore-all.ts';
import { blobRestoredText, dryRunText, restoredText } from './restore-text.ts';

// `agentdb history DB` and `agentdb restore DB …`: operator commands (whoever holds the
// deployment's Redis, as `approvals --operator`); both go through the same shard ops as HTTP.
// An answer prints for a person (a table, a restore's lines; --json: the answer as JSON) and
// exits 0; a refusal prints `{ error }` and exits 1.

/**
 * `agentdb history DB [--json] [--all-commits]`: the restorable range, the generations, the undo
 * points, the users' last commits (`--all-commits`: agentdb's own upkeep commits too).
 */
export async function history(ctx: CommandContext, flags: { json?: boolean; allCommits?: boolean }, db: string): Promise<number> {
  checkedDbFlag(db);
  return withClient(ctx, 'history', async (client) => {
    const view = await client.history(db, 'operator', { commits: flags.allCommits ? 'all' : 'user' });
    ctx.stdout.write(flags.json ? `${JSON.stringify(view)}\n` : table(view, flags.allCommits === true));
    return 0;
  });
}

/** `agentdb restore DB --at T | --through POSITION | --before POSITION [--into NEW] [--dry-run] [--json]` or `agentdb restore DB --undo ID`. */
export async function restore(
  ctx: CommandContext,
  flags: {
    at?: string;
    through?: string;
    before?: string;
    undo?: string;
    into?: string;
    dryRun?: boolean;
    by?: string;
    fromBlob?: boolean;
    all?: boolean;
    workspace?: string;
    json?: boolean;
  },
  db: string | undefined,
): Promise<number> {
  if (flags.all || flags.workspace !== undefined) {
    // Every database of the blob store (or of one workspace): the disaster restore.
    if (!flags.fromBlob) throw new UsageError('--all and --workspace restore from the blob store: add --from-blob');
    if (db !== undefined) throw new UsageError('give DB, or --all / --workspace W, not both');
    if (flags.all && flags.workspace !== undefined) throw new UsageError('give --all or --workspace W, not both');
    if (flags.into !== undefined || flags.undo !== undefined) throw new UsageError('--all and --workspace take only --at, --dry-run, --by and --json');
    if (flags.workspace !== undefined) nameFlag('--workspace', flags.workspace);
    try {
      if (flags.at !== undefined) parseMoment(flags.at);
    } catch (err) {
      throw new UsageError(`--at: ${(err as { detail?: string }).detail ?? String(err)}`);
    }
    return withClient(ctx, 'restore', (client) => restoreAll(ctx, client, flags));
  }
  if (db === undefined) throw new UsageError('give the database to restore (<workspace> or <workspace>/<agent>), or --from-blob --all');
  const by = { who: `operator:${flags.by ?? os.userInfo().username}`, via: 'operator' as const };
  // A database id or a time that cannot be read is a bad command line (exit 2), whichever way
  // the restore goes.
  for (const id of [db, flags.into]) if (id !== undefined) checkedDbFlag(id);
  try {
    if (flags.at !== undefined) parseMoment(flags.at);
  } catch (err) {
    throw new UsageError(`--at: ${(err as { detail?: string }).detail ?? String(err)}`);
  }
  if (flags.fromBlob) {
    if (flags.undo !== undefined || flags.through !== undefined || flags.before !== undefined)
      throw new UsageError('--from-blob takes only --at, --into, --dry-run, --by and --json');
    return withClient(ctx, 'restore', async (client) => {
      const result = await client.restoreFromBlob(
        db,
        {
          ...(flags.at !== undefined ? { at: flags.at } : {}),
          ...(flags.into !== undefined ? { into: flags.into } : {}),
          ...(flags.dryRun ? { dryRun: true } : {}),
          by,
        },
        'operator',
      );
      // As the other restores: lines for a person, the answer itself with --json.
      ctx.stdout.write(flags.json ? `${JSON.stringify(result)}\n` : blobRestoredText(result as BlobRestoreResult));
      return 0;
    });
  }
  const given = [flags.at, flags.through, flags.before, flags.undo].filter((v) => v !== undefined).length;
  if (given > 1) throw new UsageError('give one of --at TIME, --through POSITION, --before POSITION or --undo ID, not several');
  if (given === 0)
    throw new UsageError(
      'give --at TIME (ISO time or unix seconds), --through POSITION (keeps that commit), --before POSITION (undoes that commit and every later one) or --undo ID; a POSITION is one `agentdb activity` or `agentdb history` lists',
    );
  if (flags.undo !== undefined && flags.into !== undefined) throw new UsageError('--undo goes back in place; it takes no --into');
  return withClient(ctx, 'restore', async (client) => {
    const result = await client.restore(
      db,
      {
        ...(flags.at !== undefined ? { at: flags.at } : {}),
        ...(flags.through !== undefined ? { through: flags.through } : {}),
        ...(flags.before !== undefined ? { before: flags.before } : {}),
        ...(flags.undo !== undefined ? { undo: flags.undo } : {}),
        ...(flags.into !== undefined ? { into: flags.into } : {}),
        ...(flags.dryRun ? { dryRun: true } : {}),
        by,
      },
      'operator',
    );
    // Read by a person (a dry run: what it would take away; a restore: where it went and its
    // undo); --json gives the answer to scripts, the undo command beside it on stderr.
    if (!flags.json) {
      ctx.stdout.write(result.dryRun ? dryRunText(result) : restoredText(result, flags));
      return 0;
    }
    ctx.stdout.write(`${JSON.stringify(result)}\n`);
    if (result.undoId) ctx.stderr.write(`undo with: agentdb restore ${db} --undo ${result.undoId}\n`);
    return 0;
  });
}

/** Runs `fn` with a history client; a refusal prints `{ error }` (with the history hints) and exits by its code (`exitFor`). */
export async function withClient(ctx: CommandContext, command: string, fn: (client: HistoryClient) => Promise<number>): Promise<number> {
  // BullMQ waits for a Redis that is down without a word; say so instead.
  await checkRedis(ctx.config.redisUrl);
  const ops = new ShardOpClient({ redisUrl: ctx.config.redisUrl, prefix: ctx.config.prefix });
  const redis = connectRedis(ctx.config.redisUrl, { name: 'agentdb-cli-history' });
  try {
    return await fn(new HistoryClient(ops, ctx.config.shardCount, new AgentRegistry(redis, keysFor(ctx.config.prefix)), pickupWatch(ctx, command)));
  } catch (err) {
    const code = codeOf(err);
    if (!code) throw err;
    ctx.stdout.write(`${JSON.stringify({ error: errorBody(code, (err as { detail?: string }).detail, HISTORY_HINTS) })}\n`);
    return exitFor(code);
  } finally {
    await ops.close();
    redis.disconnect();
  }
}

/** `agentdb history`'s text; `all`: the last commits listed include agentdb's own upkeep. */
function table(view: HistoryView, all: boolean): string {
  const lines = [
    `${view.database}: restorable from ${view.earliest ?? '-'} to ${view.latest ?? '-'}`,
    ['generation', 'started', 'ended', 'commits', 'why'].join('\t'),
  ];
  for (const g of view.generations)
    lines.push([g.id, g.startedAt, g.endedAt ?? '(current)', g.commits, g.damaged ? `${g.reason}; DAMAGED: ${g.damaged}` : g.reason].join('\t'));
  if (view.lost?.length) {
    // Restores there answer HISTORY_LOST: say so before anyone picks a moment in one.
    lines.push('', 'LOST: no restore reaches these stretches (their commits never reached history)', ['after', 'before', 'gap generation'].join('\t'));
    for (const l of view.lost) lines.push([l.after, l.before, l.generation].join('\t'));
  }
  if (view.undoPoints.length) {
    lines.push('', ['undo id', 'created', 'restored to'].join('\t'));
    for (const u of view.undoPoints) lines.push([u.id, u.createdAt, u.restoredTo].join('\t'));
  }
  if (view.recentCommits?.length) {
    // The moments an undo of the last writes goes to: --at one of them keeps it and all before.
    lines.push(
      '',
      `last ${view.recentCommits.length} commits, newest first (restore --at one, or --through its position, keeps it and every commit before; --before its position undoes it and every commit after)${all ? '' : "; agentdb's own upkeep commits left out: --all-commits lists them"}`,
      ['committed at', 'generation', 'position'].join('\t'),
    );
    for (const c of view.recentCommits) lines.push([c.at, c.generation, c.position].join('\t'));
  }
  if (view.recentNote) lines.push('', view.recentNote);
  return `${lines.join('\n')}\n`;
}

/** A database id given on the command line, or a usage error (exit 2). */
export function checkedDbFlag(id: string): void {
  try {
    parseDatabaseId(id);
  } catch (err) {
    throw new UsageError(
      `a database id is <workspace> or <workspace>/<agent>, each 1 to 63 of a-z, 0-9, _ and - (starting with a letter or digit), not ${JSON.stringify(id)}: ${(err as { detail?: string }).detail ?? String(err)}`,
    );
  }
}
