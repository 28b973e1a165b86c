import { connectAnswering } from '../redis/connection.ts';
import { keysFor } from '../redis/keys.ts';
import { readUsage } from '../calls/usage.ts';
import type { CommandContext } from './context.ts';
import { nameFlag } from './name-flag.ts';

/** `agentdb usage --workspace W [--json]`: credits and calls per day, agent and tool. */
export async function usage(ctx: CommandContext, flags: { workspace: string; json?: boolean }): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  const redis = await connectAnswering(ctx.config.redisUrl, { name: 'agentdb-cli' });
  try {
    const rows = await readUsage(redis, keysFor(ctx.config.prefix), workspace);
    if (flags.json) {
      ctx.stdout.write(`${JSON.stringify(rows)}\n`);
      return 0;
    }
    ctx.stdout.write(`${['day', 'agent', 'tool', 'calls', 'credits'].join('\t')}\n`);
    for (const r of rows) ctx.stdout.write(`${[r.day, r.agent, r.tool, r.calls, r.credits].join('\t')}\n`);
    const total = rows.reduce((n, r) => n + r.credits, 0);
    ctx.stdout.write(`total credits: ${total}\n`);
    return 0;
  } finally {
    redis.disconnect();
  }
}
