import { AgentDbError } from '../errors.ts';
import { AgentKeyRing } from '../registry/agent-keys.ts';
import { AgentRegistry } from '../registry/agents.ts';
import { parseFlags } from './flags.ts';
import type { CommandContext } from './main.ts';
import { printTable, withRegistry } from './registry-command.ts';

const USAGE = `usage: agentdb keys mint --workspace W --agent SLUG [--json]
       agentdb keys revoke --workspace W --id KEY_ID
       agentdb keys list --workspace W [--agent SLUG] [--json]
`;

/**
 * `agentdb keys mint|revoke|list`: agent keys. `mint` prints the key once (it is kept only as a
 * hash) with what it grants, taken from the agent's settings now. Member keys are minted by
 * `agentdb members add`. Exit 0, 1 when the registry refuses, 2 on bad flags.
 */
export async function keys(ctx: CommandContext): Promise<number> {
  const parsed = parseFlags({
    args: ctx.argv,
    allowPositionals: true,
    options: { workspace: { type: 'string' }, agent: { type: 'string' }, id: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  const bad = (what: string) => (ctx.stderr.write(`agentdb keys: ${what}\n${USAGE}`), 2);
  if (typeof parsed === 'string') return bad(parsed);
  const { values: v, positionals } = parsed;
  const [sub, ...extra] = positionals;
  if (extra.length) return bad(`unexpected argument ${extra[0]}`);
  if (sub !== 'mint' && sub !== 'list' && sub !== 'revoke') return bad(sub ? `unknown subcommand ${sub}` : 'give a subcommand');
  if (!v.workspace) return bad('--workspace is required');
  if (sub === 'mint' && !v.agent) return bad('--agent is required');
  if (sub === 'revoke' && !v.id) return bad('--id is required');
  return withRegistry(ctx, async (redis, k) => {
    const ring = new AgentKeyRing(redis, k, new AgentRegistry(redis, k));
    if (sub === 'mint') {
      const { key, info } = await ring.mint(v.workspace!, v.agent!);
      if (v.json) ctx.stdout.write(`${JSON.stringify({ ...info, key })}\n`);
      else ctx.stdout.write(`minted ${info.id} for ${info.workspace}/${info.agent} (grants ${JSON.stringify(info.grants)})\nkey: ${key}\n`);
      (v.json ? ctx.stderr : ctx.stdout).write('This key will not be shown again: store it now (it is kept only as a hash).\n');
      return 0;
    }
    if (sub === 'revoke') {
      if (!(await ring.revoke(v.workspace!, v.id!))) throw new AgentDbError('NOT_FOUND', `${v.id} is not an active key of ${v.workspace}.`);
      ctx.stdout.write(`revoked ${v.id}: it no longer works\n`);
      return 0;
    }
    const rows = await ring.list(v.workspace!, v.agent);
    if (v.json) ctx.stdout.write(`${JSON.stringify(rows)}\n`);
    else if (!rows.length) ctx.stdout.write(`(no agent keys in ${v.workspace})\n`);
    else {
      printTable(ctx, [
        ['id', 'agent', 'database', 'shared-data', 'state', 'minted'],
        ...rows.map((r) => [r.id, r.agent, r.grants.database, String(r.grants.sharedData), r.revoked ? 'revoked' : 'active', new Date(r.createdAt).toISOString()]),
      ]);
    }
    return 0;
  });
}
