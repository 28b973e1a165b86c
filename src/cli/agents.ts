import fs from 'node:fs';
import type { AgentProfileInput } from '../contracts/agent-profile.ts';
import { removeAgent } from '../approvals/agent-removal.ts';
import { AgentDbError } from '../errors.ts';
import { AgentRegistry } from '../registry/agents.ts';
import { databasePath, shardOf } from '../contracts/database-id.ts';
import { UsageError, type CommandContext } from './context.ts';
import { nameFlag } from './name-flag.ts';
import { printTable, withRegistry } from './registry-command.ts';

// `agentdb agents set|list|remove`: registered agents, their settings and tool surface. `set`
// replaces the whole profile (flags left out take their defaults), so what it prints is what
// the agent's key calls with. Exit 0, 1 when the registry refuses.

/** The flags of `agents set`. */
export interface SetFlags {
  workspace: string;
  agent: string;
  name?: string;
  database?: string;
  approval?: string;
  sandbox?: boolean;
  sharedData?: boolean;
  surface: string;
  mode?: string;
  schemaMode?: string;
  policy?: string;
  json?: boolean;
}

/** `agentdb agents set --workspace W --agent SLUG …`. */
export function set(ctx: CommandContext, v: SetFlags): Promise<number> {
  const workspace = nameFlag('--workspace', v.workspace);
  const slug = nameFlag('--agent', v.agent);
  if (v.surface !== 'db' && (v.mode || v.schemaMode || v.policy)) throw new UsageError('--mode, --schema-mode and --policy need --surface db');
  return withRegistry(ctx, async (redis, keys) => {
    // The registry validates every value; the flags are passed on as given.
    const profile = {
      displayName: v.name ?? slug,
      // The db surface works on the agent's own database: without --database, that one.
      settings: {
        database: v.database ?? (v.surface === 'db' ? 'agent' : undefined),
        approval: v.approval,
        sandbox: v.sandbox ?? false,
        sharedData: v.sharedData ?? false,
      },
      surface: v.surface === 'db' ? { kind: 'db', mode: v.mode, schemaMode: v.schemaMode, policy: v.policy } : { kind: v.surface },
    } as AgentProfileInput;
    const registry = new AgentRegistry(redis, keys);
    const known = await registry.get(workspace, slug);
    const agent = await registry.put(workspace, slug, profile);
    ctx.stdout.write(
      v.json
        ? `${JSON.stringify(agent)}\n`
        : `${agent.workspace}/${agent.slug}: ${JSON.stringify({ name: agent.displayName, settings: agent.settings, surface: agent.surface })}\n`,
    );
    // A restore refuses to fork into a registered agent's name (that agent would read it); the
    // other order, registering a name a fork, a removed agent or keyless calls (which need no
    // registration, so come first in the README) left a database under, is said (where this
    // machine holds the worker's data folder).
    const id = `${workspace}/${slug}`;
    if (!known && fs.existsSync(databasePath(ctx.config.dataDir, workspace, slug, shardOf(id, ctx.config.shardCount)))) {
      // A restore names both its ways: on a new machine `--from-blob` without `--into` makes it
      // (session 38, N16: the note named `--into` alone). Registered without a database, the
      // agent reaches none of it (session 36, N13: the note said it read and wrote it, after the
      // command a framework adapter's refusal named).
      const reach =
        agent.settings.database === 'off'
          ? `registered with database "off" (no --database), ${slug} has no tools and does not reach it: --database agent gives it what it holds`
          : `${slug} reads and writes what it holds`;
      ctx.stderr.write(
        `note: ${id} already has a database, made by calls as ${id} without a key (\`agentdb call\` or the client library, with settings), by a restore (\`restore --into\`, or \`restore --from-blob\` bringing it from the backups), or by an agent of this name that was removed: ${reach}\n`,
      );
    }
    return 0;
  });
}

/** `agentdb agents remove --workspace W --agent SLUG`. */
export function remove(ctx: CommandContext, flags: { workspace: string; agent: string }): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  const slug = nameFlag('--agent', flags.agent);
  return withRegistry(ctx, async (redis) => {
    const { removed, withdrawn } = await removeAgent(redis, ctx.config, workspace, slug);
    if (!removed && !withdrawn) throw new AgentDbError('NOT_FOUND', `${workspace}/${slug} is not registered.`);
    const parked = withdrawn ? `; its ${withdrawn} parked call(s) rejected` : '';
    // Run again after a removal cut short (killed before its rejections): it finishes them.
    const what = removed ? `removed ${workspace}/${slug}: its keys no longer work` : `${workspace}/${slug} was not registered`;
    ctx.stdout.write(`${what}${parked}; its database is kept\n`);
    return 0;
  });
}

/** `agentdb agents list --workspace W`. */
export function list(ctx: CommandContext, flags: { workspace: string; json?: boolean }): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  return withRegistry(ctx, async (redis, keys) => {
    const rows = await new AgentRegistry(redis, keys).list(workspace);
    if (flags.json) ctx.stdout.write(`${JSON.stringify(rows)}\n`);
    else if (!rows.length) ctx.stdout.write(`(no registered agents in ${workspace})\n`);
    else {
      printTable(ctx, [
        ['agent', 'name', 'database', 'approval', 'sandbox', 'shared-data', 'surface'],
        ...rows.map((a) => [
          a.slug,
          a.displayName,
          a.settings.database,
          a.settings.approval,
          String(a.settings.sandbox),
          String(a.settings.sharedData),
          a.surface.kind,
        ]),
      ]);
    }
    return 0;
  });
}
