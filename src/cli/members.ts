import { MemberRegistry, type Role } from '../approvals/members.ts';
import { agentName, workspaceName } from '../contracts/names.ts';
import { AgentDbError } from '../errors.ts';
import { connectRedis } from '../queue/connection.ts';
import { keysFor } from '../queue/keys.ts';
import { parseFlags } from './flags.ts';
import type { CommandContext } from './main.ts';

const USAGE = `usage: agentdb members add --workspace W --name NAME [--role member|admin] [--json]
       agentdb members revoke --workspace W --name NAME
       agentdb members list --workspace W [--json]
`;

const ROLES: readonly string[] = ['member', 'admin'];

/** What a subcommand needs once its flags are parsed. */
interface Parsed {
  sub: 'add' | 'revoke' | 'list';
  workspace: string;
  name: string;
  role: Role;
  json: boolean;
}

/**
 * `agentdb members add|revoke|list`: the people who may decide a workspace's approvals. The
 * operator running this is trusted; `add` prints the new member's key once, as it is never
 * stored. Exit 0 on success, 1 when the registry refuses (a name already active, nobody to
 * revoke) with the error as JSON on stdout, 2 on bad flags.
 */
export async function members(ctx: CommandContext): Promise<number> {
  const parsed = parse(ctx);
  if (typeof parsed === 'string') {
    ctx.stderr.write(`agentdb members: ${parsed}\n${USAGE}`);
    return 2;
  }
  const redis = connectRedis(ctx.config.redisUrl, { name: 'agentdb-cli' });
  const registry = new MemberRegistry(redis, keysFor(ctx.config.prefix));
  try {
    if (parsed.sub === 'add') return await add(ctx, registry, parsed);
    if (parsed.sub === 'revoke') return await revoke(ctx, registry, parsed);
    return await list(ctx, registry, parsed);
  } catch (err) {
    if (!(err instanceof AgentDbError)) throw err;
    ctx.stdout.write(`${JSON.stringify({ error: err.toBody() })}\n`);
    return 1;
  } finally {
    redis.disconnect();
  }
}

async function add(ctx: CommandContext, registry: MemberRegistry, p: Parsed): Promise<number> {
  const { member, key } = await registry.add(p.workspace, p.name, p.role);
  if (p.json) {
    ctx.stdout.write(`${JSON.stringify({ member, key })}\n`);
  } else {
    ctx.stdout.write(`added ${member.workspace}/${member.name} (${member.role})\nkey: ${key}\n`);
  }
  // On stderr too in --json mode, so a script piping stdout still shows the person the warning.
  (p.json ? ctx.stderr : ctx.stdout).write('This key will not be shown again: store it now (it is kept only as a hash).\n');
  return 0;
}

async function revoke(ctx: CommandContext, registry: MemberRegistry, p: Parsed): Promise<number> {
  if (!(await registry.revoke(p.workspace, p.name))) {
    throw new AgentDbError('NOT_FOUND', `${p.name} is not an active member of ${p.workspace}.`);
  }
  ctx.stdout.write(`revoked ${p.workspace}/${p.name}: its key no longer works\n`);
  return 0;
}

async function list(ctx: CommandContext, registry: MemberRegistry, p: Parsed): Promise<number> {
  const rows = await registry.list(p.workspace);
  if (p.json) {
    ctx.stdout.write(`${JSON.stringify(rows)}\n`);
    return 0;
  }
  if (rows.length === 0) {
    ctx.stdout.write(`(no members in ${p.workspace})\n`);
    return 0;
  }
  const table = [['name', 'role', 'state', 'added']];
  for (const m of rows) table.push([m.name, m.role, m.revoked ? 'revoked' : 'active', new Date(m.createdAt).toISOString()]);
  const widths = table[0]!.map((_, i) => Math.max(...table.map((r) => r[i]!.length)));
  for (const r of table) ctx.stdout.write(`${r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()}\n`);
  return 0;
}

/** The parsed flags, or what is wrong with them. */
function parse(ctx: CommandContext): Parsed | string {
  const parsed = parseFlags({
    args: ctx.argv,
    allowPositionals: true,
    options: {
      workspace: { type: 'string' },
      name: { type: 'string' },
      role: { type: 'string', default: 'member' },
      json: { type: 'boolean', default: false },
    },
  });
  if (typeof parsed === 'string') return parsed;
  const { values, positionals } = parsed;
  const [sub, ...extra] = positionals;
  if (sub !== 'add' && sub !== 'revoke' && sub !== 'list') return sub ? `unknown subcommand ${sub}` : 'give a subcommand';
  if (extra.length) return `unexpected argument ${extra[0]}`;
  const ws = workspaceName.safeParse(values.workspace);
  if (!ws.success) return values.workspace === undefined ? '--workspace is required' : `--workspace: ${ws.error.issues[0]?.message}`;
  let name = '';
  if (sub !== 'list') {
    const nm = agentName.safeParse(values.name);
    if (!nm.success) {
      return values.name === undefined ? '--name is required' : `--name: must be 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit`;
    }
    name = nm.data;
  }
  if (!ROLES.includes(values.role)) return `--role must be member or admin, not ${values.role}`;
  return { sub, workspace: ws.data, name, role: values.role as Role, json: values.json };
}
