import type { ApprovalState } from '../approvals/approval.ts';
import { ApprovalService } from '../approvals/approval-service.ts';
import { MemberRegistry } from '../approvals/members.ts';
import { errorBody } from '../errors.ts';
import { connectAnswering } from '../queue/connection.ts';
import { keysFor } from '../queue/keys.ts';
import { approvalsTable } from './approvals-table.ts';
import type { CommandContext } from './context.ts';
import { nameFlag } from './name-flag.ts';

// `agentdb approvals list|approve|reject`. The CLI runs as a trusted operator, so it needs no
// key, but a decision still names a person (`--by`, an active member of the approval's
// workspace) and goes through the same core path as HTTP and the client library. A decision
// prints the approval as JSON and exits 0, or prints `{ error }` and exits 1 when refused.

/** `agentdb approvals list`: newest first, as a table or (whole) as JSON. */
export async function list(
  ctx: CommandContext,
  flags: { workspace?: string; state: ApprovalState | 'all'; limit: number; json?: boolean },
): Promise<number> {
  const workspace = flags.workspace === undefined ? undefined : nameFlag('--workspace', flags.workspace);
  return withService(ctx, async (service) => {
    const rows = await service.list({ workspace, state: flags.state, limit: flags.limit });
    if (flags.json) ctx.stdout.write(`${JSON.stringify(rows)}\n`);
    else if (rows.length) ctx.stdout.write(approvalsTable(rows));
    else ctx.stdout.write(`(no ${flags.state === 'all' ? '' : `${flags.state} `}approvals)\n`);
    return 0;
  });
}

type DecisionFlags = { by: string; reason?: string };

/** `agentdb approvals approve ID --by MEMBER [--reason R]`: the parked call runs now. */
export function approve(ctx: CommandContext, flags: DecisionFlags, id: string): Promise<number> {
  return decide(ctx, 'approve', id, flags);
}

/** `agentdb approvals reject ID --by MEMBER [--reason R]`: the call finishes with APPROVAL_REJECTED. */
export function reject(ctx: CommandContext, flags: DecisionFlags, id: string): Promise<number> {
  return decide(ctx, 'reject', id, flags);
}

async function decide(ctx: CommandContext, decision: 'approve' | 'reject', id: string, flags: DecisionFlags): Promise<number> {
  const by = nameFlag('--by', flags.by);
  return withService(ctx, async (service) => {
    const approvalId = await approvalIdOf(service, id);
    const result = approvalId
      ? await service.decideByName(approvalId, { decision, by, ...(flags.reason !== undefined ? { reason: flags.reason } : {}) })
      : ({
          ok: false,
          code: 'NOT_FOUND',
          detail: `There is no approval or parked call ${JSON.stringify(id)}: pass the ap_… id that \`agentdb approvals list\` shows, or the callId of the parked call.`,
        } as const);
    if (!result.ok) {
      ctx.stdout.write(`${JSON.stringify({ error: errorBody(result.code, result.detail) })}\n`);
      return 1;
    }
    ctx.stdout.write(`${JSON.stringify(result.approval)}\n`);
    return 0;
  });
}

/**
 * The approval `id` names: itself when it is an approval's id; otherwise the approval of the
 * call it names, found in the list by its callId (the pending one first, else the latest
 * decided, so a second decision meets the first). Approval ids are not derived from call ids.
 */
async function approvalIdOf(service: ApprovalService, id: string): Promise<string | undefined> {
  if (await service.get(id)) return id;
  for (const state of ['pending', 'all'] as const) {
    const found = (await service.list({ state })).find((a) => a.callId === id);
    if (found) return found.id;
  }
  return undefined;
}

async function withService(ctx: CommandContext, fn: (service: ApprovalService) => Promise<number>): Promise<number> {
  const { config } = ctx;
  const redis = await connectAnswering(config.redisUrl, { name: 'agentdb-cli' });
  const members = new MemberRegistry(redis, keysFor(config.prefix));
  const service = new ApprovalService({ redis, prefix: config.prefix, shardCount: config.shardCount, members });
  try {
    return await fn(service);
  } finally {
    await service.close();
    redis.disconnect();
  }
}
