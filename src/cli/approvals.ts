import type { ApprovalState } from '../approvals/approval.ts';
import { ApprovalService } from '../approvals/approval-service.ts';
import { MemberRegistry } from '../approvals/members.ts';
import { agentName, workspaceName } from '../contracts/names.ts';
import { errorBody } from '../errors.ts';
import { connectRedis } from '../queue/connection.ts';
import { keysFor } from '../queue/keys.ts';
import { approvalsTable } from './approvals-table.ts';
import { parseFlags } from './flags.ts';
import type { CommandContext } from './main.ts';

const USAGE = `usage: agentdb approvals list [--workspace W] [--state pending|approved|rejected|expired|all] [--limit N] [--json]
       agentdb approvals approve|reject ID --by MEMBER [--reason R]
`;

const STATES: readonly string[] = ['pending', 'approved', 'rejected', 'expired', 'all'];

type Parsed =
  | { sub: 'list'; workspace?: string; state: ApprovalState | 'all'; json: boolean; limit: number }
  | { sub: 'approve' | 'reject'; id: string; by: string; reason?: string };

/**
 * `agentdb approvals list|approve|reject`. The CLI runs as a trusted operator, so it needs no
 * key, but a decision still names a person (`--by`, an active member of the approval's
 * workspace) and goes through the same core path as HTTP and the client library. A decision
 * prints the approval as JSON and exits 0, or prints `{ error }` and exits 1 when refused; bad
 * flags exit 2.
 */
export async function approvals(ctx: CommandContext): Promise<number> {
  const parsed = parse(ctx);
  if (typeof parsed === 'string') {
    ctx.stderr.write(`agentdb approvals: ${parsed}\n${USAGE}`);
    return 2;
  }
  const { config } = ctx;
  const redis = connectRedis(config.redisUrl, { name: 'agentdb-cli' });
  const members = new MemberRegistry(redis, keysFor(config.prefix));
  const service = new ApprovalService({ redis, prefix: config.prefix, shardCount: config.shardCount, members });
  try {
    if (parsed.sub === 'list') {
      const rows = await service.list({ workspace: parsed.workspace, state: parsed.state, limit: parsed.limit });
      if (parsed.json) ctx.stdout.write(`${JSON.stringify(rows)}\n`);
      else if (rows.length) ctx.stdout.write(approvalsTable(rows));
      else ctx.stdout.write(`(no ${parsed.state === 'all' ? '' : `${parsed.state} `}approvals)\n`);
      return 0;
    }
    const result = await service.decideByName(parsed.id, { decision: parsed.sub, by: parsed.by, reason: parsed.reason });
    if (!result.ok) {
      ctx.stdout.write(`${JSON.stringify({ error: errorBody(result.code, result.detail) })}\n`);
      return 1;
    }
    ctx.stdout.write(`${JSON.stringify(result.approval)}\n`);
    return 0;
  } finally {
    await service.close();
    redis.disconnect();
  }
}

/** Newest approvals listed unless --limit says otherwise: the audit grows without bound. */
const DEFAULT_LIST_LIMIT = 200;

/** The parsed flags, or what is wrong with them. */
function parse(ctx: CommandContext): Parsed | string {
  const parsed = parseFlags({
    args: ctx.argv,
    allowPositionals: true,
    options: {
      workspace: { type: 'string' },
      state: { type: 'string', default: 'pending' },
      limit: { type: 'string', default: String(DEFAULT_LIST_LIMIT) },
      json: { type: 'boolean', default: false },
      by: { type: 'string' },
      reason: { type: 'string' },
    },
  });
  if (typeof parsed === 'string') return parsed;
  const { values, positionals } = parsed;
  const [sub, ...rest] = positionals;
  if (sub === 'list') {
    if (rest.length) return `unexpected argument ${rest[0]}`;
    if (values.by !== undefined || values.reason !== undefined) return '--by and --reason go with approve or reject';
    if (!STATES.includes(values.state)) return `--state must be one of ${STATES.join(', ')}`;
    let workspace: string | undefined;
    if (values.workspace !== undefined) {
      const ws = workspaceName.safeParse(values.workspace);
      if (!ws.success) return `--workspace: ${ws.error.issues[0]?.message}`;
      workspace = ws.data;
    }
    const limit = Number(values.limit);
    if (!Number.isSafeInteger(limit) || limit < 1) return '--limit takes a whole number above 0';
    return { sub, workspace, state: values.state as ApprovalState | 'all', json: values.json, limit };
  }
  if (sub === 'approve' || sub === 'reject') {
    if (rest.length !== 1 || !rest[0]) return `${sub} takes one approval ID`;
    if (values.by === undefined) return '--by MEMBER is required: a decision names the person who made it';
    // The name's format is parsing; whether it is an active member is the core's to say.
    if (!agentName.safeParse(values.by).success) return '--by: must be 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit';
    // --json is accepted (a decision prints JSON anyway); --workspace would suggest a scope it does not have.
    if (values.workspace !== undefined) return '--workspace goes with list: a decision acts in the approval\'s own workspace';
    return { sub, id: rest[0], by: values.by, ...(values.reason !== undefined ? { reason: values.reason } : {}) };
  }
  return sub ? `unknown subcommand ${sub}` : 'give a subcommand';
}
