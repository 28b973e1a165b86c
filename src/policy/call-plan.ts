import { argumentBytes, callRequest, DEFAULT_MAX_CALL_BYTES, type CallRequest } from '../contracts/call.ts';
import { plainCallRequest, plainQueryArguments, plainWriteArguments } from '../contracts/call-request-fast.ts';
import { describeIssues } from '../contracts/describe-issues.ts';
import { isToolName, toolInputs, type ToolName } from '../contracts/tools.ts';
import type { ErrorCode } from '../errors.ts';
import { resolveAccess, type Caller, type Target } from './access.ts';
import { databaseId, shardOf } from '../contracts/database-id.ts';

/** A call that passed validation and authorization, and the shard that will run it. */
export interface CallPlan {
  request: CallRequest;
  tool: ToolName;
  /** The tool's parsed arguments (defaults applied). */
  args: Record<string, unknown>;
  caller: Caller;
  target: Target;
  databaseId: string;
  shard: number;
}

/** Why a call cannot be planned; `tool` is what the caller sent, for the envelope. */
export interface PlanFailure {
  code: ErrorCode;
  detail: string;
  tool: string;
}

/**
 * Validates a call (its envelope, the size of its arguments, then the arguments themselves) and
 * decides which database it reaches. The client runs this to route the call to its shard, so a
 * call refused here never reaches Redis; the worker runs it again on the raw job, because a
 * queue is not a trust boundary. `maxCallBytes` is MAX_CALL_BYTES.
 */
export function planCall(
  input: unknown,
  shardCount: number,
  maxCallBytes: number = DEFAULT_MAX_CALL_BYTES,
  /**
   * The UTF-8 bytes of JSON text `input` was parsed from, when known (a job's data, in the
   * worker): its own arguments take fewer, so at or under `maxCallBytes` they are not
   * serialised again to be measured (issue 31).
   */
  parsedFromBytes?: number,
): { ok: true; plan: CallPlan } | { ok: false; failure: PlanFailure } {
  const rawTool = typeof (input as { tool?: unknown } | null)?.tool === 'string' ? (input as { tool: string }).tool : '';
  const fail = (code: ErrorCode, detail: string) => ({ ok: false as const, failure: { code, detail, tool: rawTool } });

  // The plain shape of an agent's call without zod (the same output); anything else, zod's verdict.
  let request = plainCallRequest(input);
  if (!request) {
    const parsed = callRequest.safeParse(input);
    if (!parsed.success) return fail('INVALID_ARGUMENTS', describeIssues(parsed.error.issues));
    request = parsed.data;
  }
  // Before anything reads the arguments: a call too large is refused whole, whatever else it holds.
  const within = parsedFromBytes !== undefined && parsedFromBytes <= maxCallBytes && request.arguments === (input as { arguments?: unknown }).arguments;
  const size = within ? parsedFromBytes : argumentBytes(request.arguments);
  if (size === undefined) return fail('INVALID_ARGUMENTS', 'arguments must be JSON (no BigInt, no cycles)');
  if (size > maxCallBytes) {
    return fail('CALL_TOO_LARGE', `the arguments take ${size} bytes as JSON; a call may take at most ${maxCallBytes}`);
  }
  if (!isToolName(request.tool)) return fail('UNKNOWN_TOOL', `"${request.tool}" is not a tool.`);

  type Args = Record<string, unknown> & { scope?: 'agent' | 'workspace'; agent?: string };
  const plain = request.tool === 'DATA_QUERY_SQL' ? plainQueryArguments : request.tool === 'DATA_WRITE_SQL' ? plainWriteArguments : undefined;
  let args = plain?.(request.arguments ?? {}) as Args | undefined;
  if (!args) {
    const argsParsed = toolInputs[request.tool].safeParse(request.arguments ?? {});
    if (!argsParsed.success) return fail('INVALID_ARGUMENTS', describeIssues(argsParsed.error.issues));
    args = argsParsed.data as Args;
  }

  const caller: Caller = request.member
    ? {
        kind: 'member',
        workspace: request.workspace,
        member: request.member.name,
        role: request.member.role,
        ...(request.member.granted ? { granted: request.member.granted } : {}),
      }
    : { kind: 'agent', workspace: request.workspace, agent: request.agent, settings: request.settings };
  const access = resolveAccess(caller, request.tool, args);
  if (!access.ok) return fail(access.code, access.detail);

  const id = databaseId(access.target.workspace, access.target.agent);
  return {
    ok: true,
    plan: {
      request,
      tool: request.tool,
      args,
      caller,
      target: access.target,
      databaseId: id,
      shard: shardOf(id, shardCount),
    },
  };
}
