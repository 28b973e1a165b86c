import { readFileSync } from 'node:fs';
import { TOOL_CONTRACTS_FILE } from '../contracts/tool-contracts-file.ts';
import type { ToolContract } from '../contracts/tools.ts';
import { UsageError, type Output } from './context.ts';

/**
 * `agentdb tools [--json] [--surface db [--mode M] [--schema-mode M]]`: the agent-visible
 * contract of the four tools, or of the db_* surface. Needs no configuration.
 */
export async function tools(ctx: Output, flags: { json?: boolean; surface?: string; mode?: string; schemaMode?: string }): Promise<number> {
  if (flags.surface === 'db') {
    const { printDbTools } = await import('./tools-db.ts');
    return printDbTools(ctx, { mode: flags.mode, schemaMode: flags.schemaMode, json: flags.json ?? false });
  }
  if (flags.mode || flags.schemaMode) throw new UsageError('--mode and --schema-mode go with --surface db');
  const contracts = await toolContracts();
  if (flags.json) {
    ctx.stdout.write(`${JSON.stringify(contracts, null, 2)}\n`);
    return 0;
  }
  for (const t of contracts) {
    const props = Object.keys((t.inputSchema.properties ?? {}) as object).join(', ');
    ctx.stdout.write(`${t.name}  [${t.tier}]\n  ${t.description}\n  arguments: ${props}\n\n`);
  }
  return 0;
}

/** The contracts a build wrote from the zod schemas; from the sources, computed from them. */
async function toolContracts(): Promise<ToolContract[]> {
  try {
    return JSON.parse(readFileSync(TOOL_CONTRACTS_FILE, 'utf8')) as ToolContract[];
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    return (await import('../contracts/tools.ts')).toolContracts();
  }
}
