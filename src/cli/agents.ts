import type { AgentProfileInput } from '../contracts/agent-profile.ts';
import { AgentDbError } from '../errors.ts';
import { AgentRegistry } from '../registry/agents.ts';
import { parseFlags } from './flags.ts';
import type { CommandContext } from './main.ts';
import { printTable, withRegistry } from './registry-command.ts';

const USAGE = `usage: agentdb agents set --workspace W --agent SLUG [--name "Display name"]
         [--database off|agent|workspace] [--approval never|write] [--sandbox] [--shared-data]
         [--surface data|db [--mode read|write] [--schema-mode read|write]
                             [--policy allow|require-approval|deny|retryable-failure]] [--json]
       agentdb agents list --workspace W [--json]
       agentdb agents remove --workspace W --agent SLUG
`;

/**
 * `agentdb agents set|list|remove`: registered agents, their settings and tool surface. `set`
 * replaces the whole profile (flags left out take their defaults), so what it prints is what
 * the agent's key calls with. Exit 0, 1 when the registry refuses, 2 on bad flags.
 */
export async function agents(ctx: CommandContext): Promise<number> {
  const parsed = parseFlags({
    args: ctx.argv,
    allowPositionals: true,
    options: {
      workspace: { type: 'string' },
      agent: { type: 'string' },
      name: { type: 'string' },
      database: { type: 'string' },
      approval: { type: 'string' },
      sandbox: { type: 'boolean', default: false },
      'shared-data': { type: 'boolean', default: false },
      surface: { type: 'string', default: 'data' },
      mode: { type: 'string' },
      'schema-mode': { type: 'string' },
      policy: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const bad = (what: string) => (ctx.stderr.write(`agentdb agents: ${what}\n${USAGE}`), 2);
  if (typeof parsed === 'string') return bad(parsed);
  const { values: v, positionals } = parsed;
  const [sub, ...extra] = positionals;
  if (extra.length) return bad(`unexpected argument ${extra[0]}`);
  if (sub !== 'set' && sub !== 'list' && sub !== 'remove') return bad(sub ? `unknown subcommand ${sub}` : 'give a subcommand');
  if (!v.workspace) return bad('--workspace is required');
  if (sub !== 'list' && !v.agent) return bad('--agent is required');
  if (v.surface !== 'db' && (v.mode || v['schema-mode'] || v.policy)) return bad('--mode, --schema-mode and --policy need --surface db');
  return withRegistry(ctx, async (redis, keys) => {
    const registry = new AgentRegistry(redis, keys);
    if (sub === 'set') {
      // The registry validates every value; the flags are passed on as given.
      const profile = {
        displayName: v.name ?? v.agent!,
        // The db surface works on the agent's own database: without --database, that one.
        settings: { database: v.database ?? (v.surface === 'db' ? 'agent' : undefined), approval: v.approval, sandbox: v.sandbox, sharedData: v['shared-data'] },
        surface: v.surface === 'db' ? { kind: 'db', mode: v.mode, schemaMode: v['schema-mode'], policy: v.policy } : { kind: v.surface },
      } as AgentProfileInput;
      const agent = await registry.put(v.workspace!, v.agent!, profile);
      ctx.stdout.write(v.json ? `${JSON.stringify(agent)}\n` : `${agent.workspace}/${agent.slug}: ${JSON.stringify({ settings: agent.settings, surface: agent.surface })}\n`);
      return 0;
    }
    if (sub === 'remove') {
      if (!(await registry.remove(v.workspace!, v.agent!))) throw new AgentDbError('NOT_FOUND', `${v.workspace}/${v.agent} is not registered.`);
      ctx.stdout.write(`removed ${v.workspace}/${v.agent}: its keys no longer work; its database is kept\n`);
      return 0;
    }
    const rows = await registry.list(v.workspace!);
    if (v.json) ctx.stdout.write(`${JSON.stringify(rows)}\n`);
    else if (!rows.length) ctx.stdout.write(`(no registered agents in ${v.workspace})\n`);
    else {
      printTable(ctx, [
        ['agent', 'name', 'database', 'approval', 'sandbox', 'shared-data', 'surface'],
        ...rows.map((a) => [a.slug, a.displayName, a.settings.database, a.settings.approval, String(a.settings.sandbox), String(a.settings.sharedData), a.surface.kind]),
      ]);
    }
    return 0;
  });
}
