import { toolContracts } from '../contracts/tools.ts';
import { commandFlags } from './flags.ts';
import { printDbTools } from './tools-db.ts';
import type { CommandContext } from './main.ts';

/** `agentdb tools [--json]`: the agent-visible contract of the four tools (`--surface db`: of db_*). */
export async function tools(ctx: CommandContext): Promise<number> {
  const parsed = commandFlags(ctx, 'tools', {
    args: ctx.argv,
    options: { json: { type: 'boolean', default: false }, surface: { type: 'string', default: 'data' }, mode: { type: 'string' }, 'schema-mode': { type: 'string' } },
  });
  if (!parsed) return 2;
  const { values } = parsed;
  if (values.surface === 'db') return printDbTools(ctx, { mode: values.mode, schemaMode: values['schema-mode'], json: values.json });
  if (values.surface !== 'data' || values.mode || values['schema-mode']) {
    ctx.stderr.write('agentdb tools: --surface is data or db; --mode and --schema-mode go with --surface db\n');
    return 2;
  }
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
