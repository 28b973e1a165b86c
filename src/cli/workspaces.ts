import type { Plan } from '../contracts/settings.ts';
import { AgentDbError } from '../errors.ts';
import { WorkspaceRegistry } from '../registry/workspaces.ts';
import type { CommandContext } from './context.ts';
import { nameFlag } from './name-flag.ts';
import { printTable, withRegistry } from './registry-command.ts';

// `agentdb workspaces set|list|remove`: the registered workspaces and their plans. A registered
// workspace's plan sets the limits of every call in it; an unregistered one runs on the
// smallest plan. Exit 0, 1 when the registry refuses.

/** `agentdb workspaces set --workspace W --plan P`. */
export function set(ctx: CommandContext, flags: { workspace: string; plan: Plan; json?: boolean }): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  return withRegistry(ctx, async (redis, keys) => {
    const ws = await new WorkspaceRegistry(redis, keys).put(workspace, flags.plan);
    ctx.stdout.write(flags.json ? `${JSON.stringify(ws)}\n` : `${ws.name}: plan ${ws.plan}\n`);
    return 0;
  });
}

/** `agentdb workspaces remove --workspace W`. */
export function remove(ctx: CommandContext, flags: { workspace: string }): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  return withRegistry(ctx, async (redis, keys) => {
    if (!(await new WorkspaceRegistry(redis, keys).remove(workspace))) throw new AgentDbError('NOT_FOUND', `${workspace} is not registered.`);
    ctx.stdout.write(`removed ${workspace}: it now runs on the unregistered plan\n`);
    return 0;
  });
}

/** `agentdb workspaces list`. */
export function list(ctx: CommandContext, flags: { json?: boolean }): Promise<number> {
  return withRegistry(ctx, async (redis, keys) => {
    const rows = await new WorkspaceRegistry(redis, keys).list();
    if (flags.json) ctx.stdout.write(`${JSON.stringify(rows)}\n`);
    else if (!rows.length) ctx.stdout.write('(no registered workspaces)\n');
    else printTable(ctx, [['workspace', 'plan', 'added'], ...rows.map((w) => [w.name, w.plan, new Date(w.createdAt).toISOString()])]);
    return 0;
  });
}
