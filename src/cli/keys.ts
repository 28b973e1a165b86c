import { AgentDbError } from '../errors.ts';
import { AgentKeyRing } from '../registry/agent-keys.ts';
import { AgentRegistry } from '../registry/agents.ts';
import type { CommandContext } from './context.ts';
import { keyFileToSave } from './key-file-save.ts';
import { nameFlag } from './name-flag.ts';
import { printTable, withRegistry } from './registry-command.ts';

// `agentdb keys mint|revoke|list`: agent keys. `mint` prints the key once (it is kept only as a
// hash) with what it grants, taken from the agent's settings now. Member keys are minted by
// `agentdb members add`. Exit 0, 1 when the registry refuses.

/** `agentdb keys mint --workspace W --agent SLUG`. */
export async function mint(ctx: CommandContext, flags: { workspace: string; agent: string; json?: boolean; saveKey?: string }): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  const agent = nameFlag('--agent', flags.agent);
  const saving = flags.saveKey !== undefined ? await keyFileToSave(flags.saveKey) : undefined;
  return withRegistry(
    ctx,
    async (redis, k) => {
      const { key, info } = await new AgentKeyRing(redis, k, new AgentRegistry(redis, k)).mint(workspace, agent);
      if (saving) {
        await saving.write(key);
        const said = `minted ${info.id} for ${info.workspace}/${info.agent} (grants ${JSON.stringify(info.grants)}); key saved to ${saving.path} (mode 600)`;
        ctx.stdout.write(flags.json ? `${JSON.stringify({ ...info, keyFile: saving.path })}\n` : `${said}\n`);
        return 0;
      }
      if (flags.json) ctx.stdout.write(`${JSON.stringify({ ...info, key })}\n`);
      else ctx.stdout.write(`minted ${info.id} for ${info.workspace}/${info.agent} (grants ${JSON.stringify(info.grants)})\nkey: ${key}\n`);
      (flags.json ? ctx.stderr : ctx.stdout).write('This key will not be shown again: store it now (it is kept only as a hash).\n');
      return 0;
    },
    { NOT_FOUND: notRegisteredHint(workspace, agent) },
  );
}

/**
 * What to run when `keys mint` names an agent nobody registered: keyless calls (`agentdb call`,
 * the client library) work without registering, so a new user reaches for a key first.
 */
function notRegisteredHint(workspace: string, agent: string): string {
  return (
    `A key is minted for a registered agent: register it first with \`agentdb agents set --workspace ${workspace} --agent ${agent} --database agent\` ` +
    `(its settings are what the key's calls run with; a workspace not yet registered needs \`agentdb workspaces set --workspace ${workspace} --plan pro\` before), ` +
    `then mint again. \`agentdb agents list --workspace ${workspace}\` lists the registered agents.`
  );
}

/** `agentdb keys revoke --workspace W --id KEY_ID`. */
export function revoke(ctx: CommandContext, flags: { workspace: string; id: string }): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  return withRegistry(ctx, async (redis, k) => {
    if (!(await new AgentKeyRing(redis, k, new AgentRegistry(redis, k)).revoke(workspace, flags.id))) {
      throw new AgentDbError('NOT_FOUND', `${flags.id} is not an active key of ${workspace}.`);
    }
    ctx.stdout.write(`revoked ${flags.id}: it no longer works\n`);
    return 0;
  });
}

/** `agentdb keys list --workspace W [--agent SLUG]`. */
export function list(ctx: CommandContext, flags: { workspace: string; agent?: string; json?: boolean }): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  const agent = flags.agent === undefined ? undefined : nameFlag('--agent', flags.agent);
  return withRegistry(ctx, async (redis, k) => {
    const rows = await new AgentKeyRing(redis, k, new AgentRegistry(redis, k)).list(workspace, agent);
    if (flags.json) ctx.stdout.write(`${JSON.stringify(rows)}\n`);
    else if (!rows.length) ctx.stdout.write(`(no agent keys in ${workspace})\n`);
    else {
      printTable(ctx, [
        ['id', 'agent', 'database', 'shared-data', 'state', 'minted'],
        ...rows.map((r) => [
          r.id,
          r.agent,
          r.grants.database,
          String(r.grants.sharedData),
          r.revoked ? 'revoked' : 'active',
          new Date(r.createdAt).toISOString(),
        ]),
      ]);
    }
    return 0;
  });
}
