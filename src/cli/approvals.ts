import type { Approval, ApprovalState } from '../approvals/approval.ts';
import { ApprovalService, type DecideResult } from '../approvals/approval-service.ts';
import { withRefusal } from '../approvals/approval-standings.ts';
import { MemberRegistry, NOT_A_MEMBER_KEY } from '../registry/members.ts';
import { errorBody, type ErrorCode } from '../errors.ts';
import type { Redis } from 'ioredis';
import { type ApprovedOutcome, approvedOutcome } from '../approvals/approved-outcome.ts';
import { connectAnswering, connectRedis } from '../redis/connection.ts';
import { latestEventId } from '../redis/events.ts';
import { keysFor } from '../redis/keys.ts';
import { approvalsTable, cell, effectText } from './approvals-table.ts';
import { UsageError, type CommandContext } from './context.ts';
import { exitFor } from './exit-status.ts';
import { nameFlag } from './name-flag.ts';
import { keyFrom, type KeyFlags } from './key-source.ts';
import { jsonLine } from './json-line.ts';

// `agentdb approvals list|approve|reject`. A decision is made with the member's own key, as on
// HTTP; deciding as a named member without it takes `--operator` (someone holding the
// deployment's Redis), and the approval records which it was. Both go through the same core
// path as HTTP and the client library. A decision prints a line saying what was decided (with
// --json, the approval record) and exits 0, or prints `{ error }` and exits by its code (`exitFor`) when refused.

/** `agentdb approvals list`: newest first, as a table or (whole) as JSON. */
export async function list(ctx: CommandContext, flags: { workspace?: string; state: ApprovalState | 'all'; limit: number; json?: boolean }): Promise<number> {
  const workspace = flags.workspace === undefined ? undefined : nameFlag('--workspace', flags.workspace);
  return withService(ctx, async (service) => {
    const rows = await service.list({ workspace, state: flags.state, limit: flags.limit });
    const refusals = await service.standings(rows);
    if (flags.json) ctx.stdout.write(jsonLine(rows.map((a) => withRefusal(a, refusals))));
    else if (rows.length) ctx.stdout.write(approvalsTable(rows, refusals));
    else ctx.stdout.write(`(no ${flags.state === 'all' ? '' : `${flags.state} `}approvals)\n`);
    return 0;
  });
}

/**
 * `agentdb approvals show ID [--json]`: one approval whole, with the effect of its call (rows
 * before and after). Exits 1 (NOT_FOUND) when there is none. The text form escapes what a terminal would act on.
 */
export async function show(ctx: CommandContext, flags: { json?: boolean }, id: string): Promise<number> {
  return withService(ctx, async (service) => {
    const approvalId = await service.resolveId(id);
    const approval = typeof approvalId === 'string' ? await service.get(approvalId) : undefined;
    if (!approval) {
      const refused = typeof approvalId !== 'string' && !approvalId.ok ? approvalId : undefined;
      const code = refused?.code ?? 'NOT_FOUND';
      ctx.stdout.write(`${JSON.stringify({ error: errorBody(code, refused?.detail ?? `no approval ${JSON.stringify(id)}`) })}\n`);
      return exitFor(code);
    }
    const refusals = await service.standings([approval]);
    if (flags.json) ctx.stdout.write(jsonLine(withRefusal(approval, refusals)));
    else ctx.stdout.write(`${approvalsTable([approval], refusals)}${effectText(approval)}`);
    return 0;
  });
}

type DecisionFlags = KeyFlags & { operator?: boolean; by?: string; reason?: string; json?: boolean };

/** `agentdb approvals approve ID [--key-file PATH] [--reason R] [--json]`: the parked call runs now. */
export function approve(ctx: CommandContext, flags: DecisionFlags, id: string): Promise<number> {
  return decide(ctx, 'approve', id, flags);
}

/** `agentdb approvals reject ID [--key-file PATH] [--reason R] [--json]`: the call finishes with APPROVAL_REJECTED. */
export function reject(ctx: CommandContext, flags: DecisionFlags, id: string): Promise<number> {
  return decide(ctx, 'reject', id, flags);
}

/** The registry's UNAUTHENTICATED hint names HTTP's header; here the key comes from the environment or a file. */
const DECISION_HINTS: Partial<Record<ErrorCode, string>> = {
  UNAUTHENTICATED:
    "Decide with your member key from `agentdb members add`: AGENTDB_MEMBER_KEY or --key-file PATH; a revoked key never works again. The CLI must use the server's REDIS_URL and AGENTDB_PREFIX, or it finds no members.",
};

/** Who decides: a member's key (their proof, as on HTTP), or an operator naming the member. */
type Proof = { key: string } | { by: string };

async function proofOf(ctx: CommandContext, flags: DecisionFlags): Promise<Proof> {
  if (flags.operator) {
    if (flags.key !== undefined || flags.keyFile !== undefined) throw new UsageError('--operator decides by name (--by); leave out --key-file and --key');
    if (flags.by === undefined) throw new UsageError('--operator takes --by MEMBER: the member on whose behalf you decide');
    return { by: nameFlag('--by', flags.by) };
  }
  if (flags.by !== undefined) {
    throw new UsageError('--by decides without proof, for operators only: add --operator, or decide with your member key (AGENTDB_MEMBER_KEY or --key-file)');
  }
  const key = await keyFrom(flags, { envName: 'AGENTDB_MEMBER_KEY', envValue: ctx.config.memberKey, stdinAllowed: true }, ctx);
  if (key === undefined)
    throw new UsageError('a decision takes your member key (from `agentdb members add`): AGENTDB_MEMBER_KEY, --key-file PATH or --key-file - (stdin)');
  return { key };
}

/**
 * How long `approve` follows the call it let run for what became of it: a statement runs in
 * milliseconds once a worker takes it; past this (no worker running, a long statement) the line
 * says it runs now, as before.
 */
const FOLLOW_MS = 5000;

async function decide(ctx: CommandContext, decision: 'approve' | 'reject', id: string, flags: DecisionFlags): Promise<number> {
  const proof = await proofOf(ctx, flags);
  const input = { decision, ...(flags.reason !== undefined ? { reason: flags.reason } : {}) };
  return withService(ctx, async (service, members, redis) => {
    const events = keysFor(ctx.config.prefix).events;
    // Before the decision: the events of its run come after it.
    const from = decision === 'approve' && !flags.json ? await latestEventId(redis, events) : undefined;
    let result: DecideResult;
    // A member sees only their own workspace's approvals, also when naming one by its call id.
    const member = 'key' in proof ? await members.authenticate(proof.key) : undefined;
    if ('key' in proof && !member) result = { ok: false, code: 'UNAUTHENTICATED', detail: NOT_A_MEMBER_KEY };
    else {
      const approvalId = await service.resolveId(id, member?.workspace, true);
      if (typeof approvalId !== 'string') result = approvalId;
      else if ('key' in proof) result = await service.decideWithKey(approvalId, proof.key, input);
      else result = await service.decideAsOperator(approvalId, { ...input, by: proof.by });
    }
    if (!result.ok) {
      ctx.stdout.write(`${JSON.stringify({ error: errorBody(result.code, result.detail, DECISION_HINTS) })}\n`);
      return exitFor(result.code);
    }
    if (flags.json) ctx.stdout.write(jsonLine(result.approval));
    else {
      const a = result.approval;
      const followed =
        from !== undefined && a.state === 'approved' && !a.ran
          ? await approvedOutcome(connectRedis(ctx.config.redisUrl, { name: 'agentdb-cli-events' }), events, from, a, FOLLOW_MS)
          : undefined;
      ctx.stdout.write(`${decidedLine(a, followed)}\n`);
    }
    return 0;
  });
}

/**
 * What a person reads of a decision: what was decided, by whom, the approval and its call, and
 * what happens to the call (how it ran, when that is already known).
 */
export function decidedLine(a: Approval, followed?: ApprovedOutcome): string {
  // The reason and a failure's words are whoever wrote them: one line, what a terminal acts on escaped.
  const words = (text: string | undefined) => (text === undefined ? '' : ` (${cell(text, 200)})`);
  const ran: { ok: boolean; code?: string; detail?: string; message?: string } | undefined =
    a.ran ?? (followed && 'ran' in followed ? followed.ran : undefined);
  let next: string;
  if (ran) next = ran.ok ? 'it ran: ok' : `it ran: failed${ran.code ? ` ${ran.code}` : ''}${words(ran.detail ?? ran.message)}`;
  else if (followed && 'askedAgain' in followed)
    next = `it did not run: its data changed since the approval was asked, so nothing was committed and it is asked again as ${followed.askedAgain} (agentdb approvals show ${followed.askedAgain})`;
  else if (a.state === 'approved') next = 'it runs now';
  else if (a.state === 'rejected') next = 'it will not run; the agent gets APPROVAL_REJECTED and the reason';
  else next = a.state;
  const reason = a.reason === undefined ? '' : `; reason: ${cell(a.reason, 200)}`;
  return `${a.state} ${a.id} (call ${a.callId} of ${a.workspace}/${a.agent}) by ${a.decidedBy}: ${next}${reason}`;
}

async function withService(ctx: CommandContext, fn: (service: ApprovalService, members: MemberRegistry, redis: Redis) => Promise<number>): Promise<number> {
  const { config } = ctx;
  const redis = await connectAnswering(config.redisUrl, { name: 'agentdb-cli' });
  const members = new MemberRegistry(redis, keysFor(config.prefix));
  const service = new ApprovalService({ redis, prefix: config.prefix, shardCount: config.shardCount, members });
  try {
    return await fn(service, members, redis);
  } finally {
    await service.close();
    redis.disconnect();
  }
}
