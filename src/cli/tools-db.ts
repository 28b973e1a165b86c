import { dbToolContracts } from '../contracts/db-tools.ts';
import type { Output } from './context.ts';

const MODES = ['read', 'write'];

/**
 * `agentdb tools --surface db [--mode read|write] [--schema-mode read|write] [--json]`: the
 * db_* compatibility tools an agent registered with that surface sees (db_exec only in a write
 * mode), with exactly the JSON Schemas of db-capability.md.
 */
export function printDbTools(ctx: Output, opts: { mode?: string; schemaMode?: string; json: boolean }): number {
  const mode = opts.mode ?? 'read';
  const schemaMode = opts.schemaMode ?? 'read';
  if (!MODES.includes(mode) || !MODES.includes(schemaMode)) {
    ctx.stderr.write('agentdb tools: --mode and --schema-mode take read or write\n');
    return 2;
  }
  const contracts = dbToolContracts({ mode: mode as 'read' | 'write', schemaMode: schemaMode as 'read' | 'write' });
  if (opts.json) {
    ctx.stdout.write(`${JSON.stringify(contracts, null, 2)}\n`);
    return 0;
  }
  for (const t of contracts) {
    const props = Object.keys((t.inputSchema.properties ?? {}) as object).join(', ') || '(none)';
    ctx.stdout.write(`${t.name}  [${t.tier}]\n  ${t.description}\n  arguments: ${props}\n\n`);
  }
  return 0;
}
