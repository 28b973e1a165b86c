import type { Redis } from 'ioredis';
import { MemberRegistry, type Role } from '../registry/members.ts';
import { AgentDbError } from '../errors.ts';
import { OAuthGrants } from '../oauth/oauth-grants.ts';
import { keysFor } from '../redis/keys.ts';
import type { CommandContext } from './context.ts';
import { keyFileToSave } from './key-file-save.ts';
import { nameFlag } from './name-flag.ts';
import { printTable, withRegistry } from './registry-command.ts';

// `agentdb members add|revoke|list`: the people who may decide a workspace's approvals. The
// operator running this is trusted. Exit 0 on success, 1 when the registry refuses (a name
// already active, nobody to revoke) with the error as JSON on stdout, 2 on a bad command line.

/** `agentdb members add`: prints the new member's key once, as it is never stored. */
export async function add(ctx: CommandContext, flags: { workspace: string; name: string; role: Role; json?: boolean; saveKey?: string }): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  const name = nameFlag('--name', flags.name);
  const saving = flags.saveKey !== undefined ? await keyFileToSave(flags.saveKey) : undefined;
  return withMembers(ctx, async (registry) => {
    const { member, key } = await registry.add(workspace, name, flags.role);
    if (saving) {
      await saving.write(key);
      const said = `added ${member.workspace}/${member.name} (${member.role}); key saved to ${saving.path} (mode 600)`;
      ctx.stdout.write(flags.json ? `${JSON.stringify({ member, keyFile: saving.path })}\n` : `${said}\n`);
      return 0;
    }
    if (flags.json) {
      ctx.stdout.write(`${JSON.stringify({ member, key })}\n`);
    } else {
      ctx.stdout.write(`added ${member.workspace}/${member.name} (${member.role})\nkey: ${key}\n`);
    }
    // On stderr too in --json mode, so a script piping stdout still shows the person the warning.
    (flags.json ? ctx.stderr : ctx.stdout).write('This key will not be shown again: store it now (it is kept only as a hash).\n');
    return 0;
  });
}

/** `agentdb members revoke`: the member's key stops working, and every OAuth grant of theirs ends. */
export async function revoke(ctx: CommandContext, flags: { workspace: string; name: string }): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  const name = nameFlag('--name', flags.name);
  return withMembers(ctx, async (registry, redis) => {
    if (!(await registry.revoke(workspace, name))) {
      throw new AgentDbError('NOT_FOUND', `Member ${name} is not active in ${workspace}: never added, or revoked.`);
    }
    // Even with OAUTH=off now, grants made while it was on are ended (their lifetimes do not matter here).
    const grants = new OAuthGrants(redis, keysFor(ctx.config.prefix), registry, ctx.config.oauth ?? { accessTtlS: 1, refreshTtlS: 1 });
    const ended = await grants.revokeMember(workspace, name);
    ctx.stdout.write(`revoked ${workspace}/${name}: its key no longer works${ended ? `, and its ${ended} OAuth grant(s) ended` : ''}\n`);
    return 0;
  });
}

/** `agentdb members list`: a table, or JSON; never a key. */
export async function list(ctx: CommandContext, flags: { workspace: string; json?: boolean }): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  return withMembers(ctx, async (registry) => {
    const rows = await registry.list(workspace);
    if (flags.json) {
      ctx.stdout.write(`${JSON.stringify(rows)}\n`);
      return 0;
    }
    if (rows.length === 0) {
      ctx.stdout.write(`(no members in ${workspace})\n`);
      return 0;
    }
    printTable(ctx, [
      ['name', 'role', 'state', 'added'],
      ...rows.map((m) => [m.name, m.role, m.revoked ? 'revoked' : 'active', new Date(m.createdAt).toISOString()]),
    ]);
    return 0;
  });
}

/** {@link withRegistry} with the member registry. */
function withMembers(ctx: CommandContext, fn: (registry: MemberRegistry, redis: Redis) => Promise<number>): Promise<number> {
  return withRegistry(ctx, (redis, keys) => fn(new MemberRegistry(redis, keys), redis));
}
