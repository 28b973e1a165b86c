import { workspaceName } from '../contracts/names.ts';
import { connectRedis } from '../queue/connection.ts';
import { keysFor } from '../queue/keys.ts';
import { readUsage } from '../queue/usage.ts';
import { commandFlags } from './flags.ts';
import type { CommandContext } from './main.ts';

/** `agentdb usage --workspace W [--json]`: credits and calls per day, agent and tool. */
export async function usage(ctx: CommandContext): Promise<number> {
  const parsed = commandFlags(ctx, 'usage', {
    args: ctx.argv,
    options: { workspace: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  if (!parsed) return 2;
  const { values } = parsed;
  if (values.workspace === undefined) {
    ctx.stderr.write('agentdb usage: --workspace is required\n');
    return 2;
  }
  const ws = workspaceName.safeParse(values.workspace);
  if (!ws.success) {
    ctx.stderr.write(`agentdb usage: --workspace: ${ws.error.issues[0]?.message ?? 'required'}\n`);
    return 2;
  }
  const redis = connectRedis(ctx.config.redisUrl);
  try {
    const rows = await readUsage(redis, keysFor(ctx.config.prefix), ws.data);
    if (values.json) {
      ctx.stdout.write(`${JSON.stringify(rows)}\n`);
      return 0;
    }
    ctx.stdout.write(`${['day', 'agent', 'tool', 'calls', 'credits'].join('\t')}\n`);
    for (const r of rows) ctx.stdout.write(`${[r.day, r.agent, r.tool, r.calls, r.credits].join('\t')}\n`);
    const total = rows.reduce((n, r) => n + r.credits, 0);
    ctx.stdout.write(`total credits: ${total}\n`);
    return 0;
  } catch (err) {
    ctx.stderr.write(`agentdb usage: Redis did not answer: ${(err as Error).message}\n`);
    return 1;
  } finally {
    redis.disconnect();
  }
}
