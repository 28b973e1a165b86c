import { toolContracts } from '../contracts/tools.ts';
import { commandFlags } from './flags.ts';
import type { CommandContext } from './main.ts';

/** `agentdb tools [--json]`: the agent-visible contract of the four tools. */
export async function tools(ctx: CommandContext): Promise<number> {
  const parsed = commandFlags(ctx, 'tools', { args: ctx.argv, options: { json: { type: 'boolean', default: false } } });
  if (!parsed) return 2;
  const { values } = parsed;
  const contracts = toolContracts();
  if (values.json) {
    ctx.stdout.write(`${JSON.stringify(contracts, null, 2)}\n`);
    return 0;
  }
  for (const t of contracts) {
    const props = Object.keys((t.inputSchema.properties ?? {}) as object).join(', ');
    ctx.stdout.write(`${t.name}  [${t.tier}]\n  ${t.description}\n  arguments: ${props}\n\n`);
  }
  return 0;
}
