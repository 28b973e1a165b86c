import { connectAnswering } from '../redis/connection.ts';
import { keysFor } from '../redis/keys.ts';
import { readUsage } from '../calls/usage.ts';
import { WorkspaceRedisBudget } from '../calls/workspace-redis-budget.ts';
import { WorkspaceRegistry } from '../registry/workspaces.ts';
import type { CommandContext } from './context.ts';
import { nameFlag } from './name-flag.ts';

/**
 * `agentdb usage --workspace W [--json]`: credits and calls per day, agent and tool; as text,
 * also what the workspace holds in Redis against its budget (see `WorkspaceRedisBudget`).
 */
export async function usage(ctx: CommandContext, flags: { workspace: string; json?: boolean }): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  const redis = await connectAnswering(ctx.config.redisUrl, { name: 'agentdb-cli' });
  try {
    const keys = keysFor(ctx.config.prefix);
    const rows = await readUsage(redis, keys, workspace);
    if (flags.json) {
      ctx.stdout.write(`${JSON.stringify(rows)}\n`);
      return 0;
    }
    ctx.stdout.write(`${['day', 'agent', 'tool', 'calls', 'credits'].join('\t')}\n`);
    for (const r of rows) ctx.stdout.write(`${[r.day, r.agent, r.tool, r.calls, r.credits].join('\t')}\n`);
    const total = rows.reduce((n, r) => n + r.credits, 0);
    ctx.stdout.write(`total credits: ${total}\n`);
    const plan = await new WorkspaceRegistry(redis, keys).planOf(workspace);
    const budget = new WorkspaceRedisBudget(redis, keys, ctx.config.redisBytesPerWorkspace);
    const { held } = await budget.note(workspace, []);
    ctx.stdout.write(
      `redis: ${held} of ${budget.capOf(plan)} bytes (${ctx.config.redisBytesPerWorkspace > 0 ? 'REDIS_BYTES_PER_WORKSPACE' : `plan ${plan}`})\n`,
    );
    return 0;
  } finally {
    redis.disconnect();
  }
}
