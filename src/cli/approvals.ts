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
       agentdb approvals approve|reject ID [--key KEY] [--reason R]     (KEY: your member key, or AGENTDB_MEMBER_KEY)
       agentdb approvals approve|reject ID --operator --by MEMBER [--reason R]
`;

const STATES: readonly string[] = ['pending', 'approved', 'rejected', 'expired', 'all'];

type Parsed =
  | { sub: 'list'; workspace?: string; state: ApprovalState | 'all'; json: boolean; limit: number }
  | { sub: 'approve' | 'reject'; id: string; proof: { key: string } | { by: string; operator: true }; reason?: string };

/**
 * `agentdb approvals list|approve|reject`. A decision is made with the member's own key, as on
 * HTTP; deciding as a named member without it takes `--operator` (a person with the deployment's
 * Redis in hand), and the approval records which it was. Both go through the same core path as
 * HTTP and the client library. A decision
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
    const input = { decision: parsed.sub, ...(parsed.reason !== undefined ? { reason: parsed.reason } : {}) };
    const result =
      'key' in parsed.proof
        ? await service.decideWithKey(parsed.id, parsed.proof.key, input)
        : await service.decideAsOperator(parsed.id, { ...input, by: parsed.proof.by });
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
      key: { type: 'string' },
      operator: { type: 'boolean', default: false },
      reason: { type: 'string' },
    },
  });
  if (typeof parsed === 'string') return parsed;
  const { values, positionals } = parsed;
  const [sub, ...rest] = positionals;
  if (sub === 'list') {
    if (rest.length) return `unexpected argument ${rest[0]}`;
    if (values.by !== undefined || values.reason !== undefined || values.key !== undefined || values.operator) return '--by, --key, --operator and --reason go with approve or reject';
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
    // --json is accepted (a decision prints JSON anyway); --workspace would suggest a scope it does not have.
    if (values.workspace !== undefined) return '--workspace goes with list: a decision acts in the approval\'s own workspace';
    const reason = values.reason !== undefined ? { reason: values.reason } : {};
    if (values.operator) {
      if (values.key !== undefined) return '--operator decides by name (--by); leave out --key';
      if (values.by === undefined) return '--operator takes --by MEMBER: the member on whose behalf you decide';
      // The name's format is parsing; whether it is an active member is the core's to say.
      if (!agentName.safeParse(values.by).success) return '--by: must be 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit';
      return { sub, id: rest[0], proof: { by: values.by, operator: true }, ...reason };
    }
    if (values.by !== undefined) return '--by decides without proof, for operators only: add --operator, or decide with your member key (--key or AGENTDB_MEMBER_KEY)';
    const key = values.key ?? ctx.config.memberKey;
    if (key === undefined) return 'a decision takes your member key: --key KEY or AGENTDB_MEMBER_KEY (from `agentdb members add`)';
    return { sub, id: rest[0], proof: { key }, ...reason };
  }
  return sub ? `unknown subcommand ${sub}` : 'give a subcommand';
}
