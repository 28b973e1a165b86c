import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { csvArgs, pageArgs } from '../../contracts/browse.ts';
import type { ShardOpJobData } from '../../contracts/shard-op.ts';
import { agentName, workspaceName } from '../../contracts/names.ts';
import { UNREGISTERED_PLAN } from '../../contracts/settings.ts';
import { AgentDbError } from '../../errors.ts';
import { databaseId, parseDatabaseId, shardOf, WORKSPACE_FILE } from '../../contracts/database-id.ts';
import type { DbTarget } from '../../executor/executor-protocol.ts';
import { dbTarget } from '../../calls/exec-request.ts';
import { runAsOf } from '../../calls/as-of-run.ts';
import type { ShardOpContext, ShardOpHandler } from './shard-ops.ts';

/**
 * The data browser's reads (web page, CSV export), run by a database's owner through its
 * executor like every other read, so they queue behind that database's statements and never
 * open a file another worker owns. They are agentdb's own reads of named tables, not agent
 * SQL, and they are not metered.
 */

function parsed<T extends z.ZodType>(schema: T, args: unknown): z.output<T> {
  const r = schema.safeParse(args);
  if (!r.success) throw new AgentDbError('INVALID_ARGUMENTS', r.error.issues[0]?.message ?? 'invalid arguments');
  return r.data;
}

/** The executor's view of the op's database, checked to belong to the shard it runs on. */
function targetOf(data: ShardOpJobData, ctx: ShardOpContext): DbTarget {
  if (typeof data.db !== 'string') throw new AgentDbError('INVALID_ARGUMENTS', 'a browse op names its database');
  const target = parseDatabaseId(data.db);
  const id = databaseId(target.workspace, target.agent);
  if (shardOf(id, ctx.config.shardCount) !== ctx.shard) throw new AgentDbError('INTERNAL', `database ${id} is not on shard ${ctx.shard}`);
  return dbTarget(ctx.config, id, target, ctx.shard, UNREGISTERED_PLAN);
}

async function executed(ctx: ShardOpContext, req: Parameters<ShardOpContext['executor']['run']>[0]): Promise<unknown> {
  const outcome = await ctx.executor.run(req);
  if (!outcome.ok) throw new AgentDbError(outcome.error.code, outcome.error.detail);
  return outcome.result;
}

const filesArgs = z.strictObject({ workspace: workspaceName });

/** The browse ops by name, for `shardOpHandlers()`. */
export function browseOps(): Record<string, ShardOpHandler> {
  return {
    /** Tables and views with columns and row counts (DATA_DESCRIBE_SCHEMA's answer). */
    'browse.tables': async (data, ctx) => executed(ctx, { op: 'describe', db: targetOf(data, ctx) }),
    /** Size, tables, rows and last write (the Data page's list; see `databaseFigures`). */
    'browse.figures': async (data, ctx) => executed(ctx, { op: 'figures', db: targetOf(data, ctx) }),
    'browse.page': async (data, ctx) => {
      const { asOf, ...args } = parsed(pageArgs, data.args);
      const db = targetOf(data, ctx);
      if (asOf === undefined) return executed(ctx, { op: 'browse', db, args });
      // A person's read of the past: the same moment, cache and quota as an agent's `as_of`.
      const outcome = await runAsOf({ op: 'browse', db, args, asOf: { target: { at: asOf } } }, ctx.executor, ctx.quota, parseDatabaseId(db.id).workspace);
      if (!outcome.ok) throw new AgentDbError(outcome.error.code, outcome.error.detail);
      return outcome.result;
    },
    'browse.csv': async (data, ctx) => executed(ctx, { op: 'csv', db: targetOf(data, ctx), args: parsed(csvArgs, data.args) }),
    /**
     * The agents of a workspace that have a database file on this shard: agents called through
     * the client library with settings of their own are in no registry, only on disk.
     */
    'browse.files': async (data, ctx) => {
      const { workspace } = parsed(filesArgs, data.args);
      const folder = path.join(ctx.config.dataDir, 'shards', String(ctx.shard), workspace);
      let names: string[];
      try {
        names = await readdir(folder);
      } catch {
        return { agents: [] };
      }
      const agents = names
        .filter((f) => f.endsWith('.sqlite') && f !== WORKSPACE_FILE)
        .map((f) => f.slice(0, -'.sqlite'.length))
        .filter((a) => agentName.safeParse(a).success);
      return { agents, shared: names.includes(WORKSPACE_FILE) };
    },
  };
}
