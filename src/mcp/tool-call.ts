import { type CallToolRequest, type CallToolResult, type CreateTaskResult, ErrorCode, McpError, type RequestId } from '@modelcontextprotocol/sdk/types.js';
import { errorEnvelope } from '../contracts/envelope.ts';
import { absentNulls } from '../contracts/strict-schema.ts';
import { isRetryable } from '../errors.ts';
import type { ApprovalRequiredAnswer } from '../calls/bearer-key-calls.ts';
import type { CallAnswer } from '../calls/client.ts';
import { MAY_PARK } from '../calls/pending-call-joins.ts';
import { unsentUnavailable } from '../calls/outage-answers.ts';
import type { KeyedCall, Principal } from '../registry/principal.ts';
import { mcpToolCallSpan, traceparentContext } from '../tracing.ts';
import type { McpServerDeps } from './server.ts';
import type { RedisTaskStore } from './task-store.ts';
import { toolResult, type McpToolResult } from './tool-result.ts';
import { toolsFor, type McpEndpoint } from './toolkit.ts';

/**
 * The `_meta` key of `tools/call` params under which an MCP client names its own call id (the
 * spec's `_meta` takes prefixed keys for an implementation's own use). With it, a call is the
 * caller's idempotency key as on every other surface: sent again, the same call answers the
 * first one's outcome; another call under the id answers IDEMPOTENCY_CONFLICT.
 */
export const CALL_ID_META = 'agentdb/callId';

/** What a `tools/call` handler uses of the SDK's request context. */
export interface McpToolCallExtra {
  /** Aborted when the request is cancelled or its client has gone. */
  signal: AbortSignal;
  requestId: RequestId;
}

/**
 * Answers one parsed `tools/call`: a result, or a thrown `McpError` (a protocol error). The SDK
 * `Server` of `mcpServer` runs it, and so does `/mcp`'s fast path (src/http/mcp-fast-call.ts),
 * so both answer alike.
 */
export type McpToolCall = (request: CallToolRequest, extra: McpToolCallExtra) => Promise<CallToolResult | CreateTaskResult>;

/**
 * The `tools/call` handler of one principal on one endpoint: it goes through the same keyed-call
 * core as `/v1/calls` (policy, call keys, approvals, resends joining a waiting call). `tasks`:
 * the principal's task store, when the server offers MCP Tasks. `current`: who the key speaks
 * for now (a stdio server asks before every request).
 */
export function mcpToolCall(
  endpoint: McpEndpoint,
  deps: Pick<McpServerDeps, 'calls' | 'approvalWaitMs' | 'joins' | 'onFault'>,
  current: () => Promise<Principal>,
  tasks?: RedisTaskStore,
): McpToolCall {
  const callTool: McpToolCall = async (request, extra) => {
    const { name, arguments: args, _meta: meta } = request.params;
    // A client that asked for a task gets one whatever the call answers; `tasks` is always there
    // then (the SDK refuses a task-augmented request when the server declared no tasks).
    const asTask = request.params.task !== undefined && tasks !== undefined;
    const reply = async (result: McpToolResult, callId: string, ok: boolean): Promise<CallToolResult | CreateTaskResult> =>
      asTask ? { task: await tasks.start({ callId, result, ok }) } : result;
    // A refusal of the request gets no task (the core's rule, `KeyedCalls.refusesTheRequest`:
    // /v1/calls answers it with its status, not a 200 envelope); nor does a call refused before it was taken
    // (its plan: its arguments, its access; the Redis budget), which asked no rate nor budget or
    // was refused by it: a task each, as fast as the server answered (session 30, T7: 2,000 in
    // 95 s, 7.4 MB kept 48 h against a budget of 1,000 bytes). The SDK's client takes nothing but a
    // task for a task request, so it is a protocol error: -32603 for one worth sending again later
    // (retryable, or `retryAfter`), -32602 for one that is not, as it is.
    const untaken = (answer: CallAnswer | ApprovalRequiredAnswer): McpError | undefined => {
      if (!asTask || answer.ok || !('error' in answer)) return undefined;
      const { code, message, retryAfter } = answer.error;
      if (!deps.calls.refusesTheRequest(answer) && !deps.calls.untaken(answer)) return undefined;
      const later = retryAfter !== undefined || isRetryable(code);
      return new McpError(later ? ErrorCode.InternalError : ErrorCode.InvalidParams, `${code}: ${message}`);
    };
    // Redis away: no task can be kept either, so a task request is answered with the error itself.
    // Under the client's own call id the call may still run: this send or an earlier one may
    // have reached Redis (review F4), and a resend under the id learns its outcome.
    // A call without an id of its own gets one, as /v1/calls answers it (`unsentUnavailable`),
    // never an empty one (session 31, H6).
    const unavailable = (id: string | undefined): CallToolResult => {
      if (asTask) throw new McpError(ErrorCode.InternalError, 'UNAVAILABLE: agentdb could not take the call; try again shortly.');
      return toolResult(unsentUnavailable(id, name, 'agentdb could not take the call; try again shortly.'), { ownCallId: id !== undefined });
    };
    const callId = meta?.[CALL_ID_META];
    if (callId !== undefined && typeof callId !== 'string') {
      const detail = `_meta["${CALL_ID_META}"] must be a string (the call id), got ${JSON.stringify(callId)}.`;
      // No call was made: a task request gets no task for it (see `untaken`).
      if (asTask) throw new McpError(ErrorCode.InvalidParams, `INVALID_ARGUMENTS: ${detail}`);
      return toolResult(errorEnvelope('', name, 'INVALID_ARGUMENTS', detail));
    }
    let principal: Principal;
    try {
      principal = await current();
    } catch (err) {
      if (err instanceof McpError) throw err;
      deps.onFault?.(err);
      return unavailable(callId);
    }
    // A protocol error, as the spec (2025-06-18 and later, tools) has it: no tool ran, and a
    // client checks the name it sent, not a result.
    const tool = toolsFor(principal, endpoint).find((t) => t.name === name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    // Only a tool that may wait for a person is listed with `execution.taskSupport`; one listed
    // without it may not be called as a task, and the spec (2025-11-25, tasks) has the server
    // answer -32601. A task for a read was only a record kept 48 h in the workspace's Redis budget
    // for an answer the request already had.
    if (asTask && !MAY_PARK.has(name)) {
      throw new McpError(
        ErrorCode.MethodNotFound,
        `${name} is not offered as a task (tools/list gives it no execution.taskSupport): call it without params.task.`,
      );
    }
    // Null for an optional argument is its absence, as the strict schemas give it.
    const call: KeyedCall = { tool: name, arguments: absentNulls(args ?? {}, tool.inputSchema), ...(callId !== undefined ? { callId } : {}) };
    try {
      // Without a call id of its own, the same write already waiting is this one sent again: it
      // goes under that call's id and joins it (PendingCallJoins). The id is claimed before the
      // call is enqueued, so that sends at the same moment make one call.
      const joinKey = callId === undefined ? deps.joins?.keyFor(principal, call) : undefined;
      const claim = joinKey ? await deps.joins!.claim(joinKey) : undefined;
      const held = claim?.callId;
      const deadline = Date.now() + deps.approvalWaitMs;
      // Cancelled (notifications/cancelled) or its connection gone (the server closes): the
      // wait stops listening at once; the SDK answers nothing for a cancelled request.
      const opts = { maxWaitMs: deps.approvalWaitMs, signal: extra.signal };
      // First until the call has run or parked (all a task waits for), so that a call that waits
      // is noted for a resend to join before the wait, not after: a client that gives up sooner
      // (its own timeout, a cancel) sends the call again, and that resend must find it.
      let answer = await deps.calls.call(principal, held ? { ...call, callId: held } : call, { ...opts, wait: false });
      // A joiner whose call was the one enqueued (the first send refused at once) keeps the window open.
      if (joinKey && held && claim?.joined && isPending(answer)) await deps.joins!.remember(joinKey, held);
      if (!asTask && 'status' in answer) {
        // The call's own wait going on (counted as the call), not a lookup of the caller's.
        answer = await deps.calls.result(principal, answer.callId, { ...opts, wait: true, maxWaitMs: Math.max(0, deadline - Date.now()), followUp: true });
      }
      const pending = isPending(answer);
      // The outcome ends the window in which the same write joins this call (PendingCallJoins.settle).
      if (joinKey && claim) await deps.joins!.settle(principal, joinKey, claim, answer, pending, deps.calls.untaken(answer));
      if (asTask && pending) {
        const task = await tasks.start({ callId: answer.callId, statusMessage: waitingFor(answer), ...(joinKey ? { joinKey } : {}) });
        return { task };
      }
      const refused = untaken(answer);
      if (refused) throw refused;
      return reply(toolResult(answer, { ownCallId: callId !== undefined }), answer.callId, answer.ok);
    } catch (err) {
      // A protocol answer already (a task call refused before it was taken) stays one.
      if (extra.signal.aborted || err instanceof McpError) throw err;
      // A fault (Redis down): the client gets a coded error, the log gets the cause.
      deps.onFault?.(err);
      return unavailable(callId);
    }
  };
  const tracer = deps.calls.tracer;
  if (!tracer) return callTool;
  // With tracing on, each call is a `tools/call <tool>` server span (MCP semantic conventions)
  // continuing the trace its `_meta` names; the client's `execute_tool` span runs inside it.
  return (request, extra) => {
    const meta = request.params._meta as Record<string, unknown> | undefined;
    const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
    const parent = traceparentContext(str(meta?.traceparent), str(meta?.tracestate));
    return mcpToolCallSpan(tracer, { tool: request.params.name, requestId: extra.requestId }, parent, () => callTool(request, extra));
  };
}

/** An answer given before the call's outcome: it still waits (for a person, or its turn). */
function isPending(answer: CallAnswer | ApprovalRequiredAnswer): boolean {
  return 'status' in answer || ('approval' in answer && answer.error.code === 'APPROVAL_REQUIRED');
}

/** A waiting task's status message: what it waits for. */
function waitingFor(answer: CallAnswer | ApprovalRequiredAnswer): string {
  const approval = 'approval' in answer ? answer.approval : undefined;
  if (approval) return `Waiting for a person to approve call ${answer.callId} (approval ${approval.id}, expires ${approval.expiresAt}); it has not run yet.`;
  return `Call ${answer.callId} is ${'status' in answer ? answer.status : 'on its way'}; it has not finished yet.`;
}
