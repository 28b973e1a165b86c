import { PLANS, type Plan } from '../contracts/settings.ts';
import { AgentDbError } from '../errors.ts';
import { WorkspaceRegistry } from '../registry/workspaces.ts';
import { parseFlags } from './flags.ts';
import type { CommandContext } from './main.ts';
import { printTable, withRegistry } from './registry-command.ts';

const USAGE = `usage: agentdb workspaces set --workspace W --plan pro|business|enterprise [--json]
       agentdb workspaces list [--json]
       agentdb workspaces remove --workspace W
`;

/**
 * `agentdb workspaces set|list|remove`: the registered workspaces and their plans. A registered
 * workspace's plan sets the limits of every call in it; an unregistered one runs on the
 * smallest plan. Exit 0, 1 when the registry refuses, 2 on bad flags.
 */
export async function workspaces(ctx: CommandContext): Promise<number> {
  const parsed = parseFlags({
    args: ctx.argv,
    allowPositionals: true,
    options: { workspace: { type: 'string' }, plan: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  const bad = (what: string) => (ctx.stderr.write(`agentdb workspaces: ${what}\n${USAGE}`), 2);
  if (typeof parsed === 'string') return bad(parsed);
  const { values, positionals } = parsed;
  const [sub, ...extra] = positionals;
  if (extra.length) return bad(`unexpected argument ${extra[0]}`);
  if (sub !== 'set' && sub !== 'list' && sub !== 'remove') return bad(sub ? `unknown subcommand ${sub}` : 'give a subcommand');
  if (sub !== 'list' && !values.workspace) return bad('--workspace is required');
  if (sub === 'set' && !PLANS.includes(values.plan as Plan)) return bad(`--plan must be one of ${PLANS.join(', ')}`);
  return withRegistry(ctx, async (redis, keys) => {
    const registry = new WorkspaceRegistry(redis, keys);
    if (sub === 'set') {
      const ws = await registry.put(values.workspace!, values.plan as Plan);
      ctx.stdout.write(values.json ? `${JSON.stringify(ws)}\n` : `${ws.name}: plan ${ws.plan}\n`);
      return 0;
    }
    if (sub === 'remove') {
      if (!(await registry.remove(values.workspace!))) throw new AgentDbError('NOT_FOUND', `${values.workspace} is not registered.`);
      ctx.stdout.write(`removed ${values.workspace}: it now runs on the unregistered plan\n`);
      return 0;
    }
    const rows = await registry.list();
    if (values.json) ctx.stdout.write(`${JSON.stringify(rows)}\n`);
    else if (!rows.length) ctx.stdout.write('(no registered workspaces)\n');
    else printTable(ctx, [['workspace', 'plan', 'added'], ...rows.map((w) => [w.name, w.plan, new Date(w.createdAt).toISOString()])]);
    return 0;
  });
}
