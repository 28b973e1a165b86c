import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { Protocol } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  type CreateTaskResult,
  ErrorCode,
  GetTaskPayloadRequestSchema,
  ListToolsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import { errorEnvelope } from '../contracts/envelope.ts';
import type { ApprovalRequiredAnswer, KeyedCalls } from '../calls/bearer-key-calls.ts';
import type { CallAnswer } from '../calls/client.ts';
import { isTransient } from '../calls/call-answers.ts';
import { MAY_PARK, type PendingCallJoins } from '../calls/pending-call-joins.ts';
import type { KeyedCall, Principal } from '../registry/principal.ts';
import { RedisTaskStore, type McpTaskDeps } from './task-store.ts';
import { toolResult, type McpToolResult } from './tool-result.ts';
import { toolsFor, type McpEndpoint, type SchemaVariant } from './toolkit.ts';
import { absentNulls } from '../contracts/strict-schema.ts';
import { mcpToolCallSpan, traceparentContext } from '../tracing.ts';

/** What an MCP server for one principal needs. */
export interface McpServerDeps {
  calls: KeyedCalls;
  /** How long a tool call waits for a person's decision before answering that it is pending. */
  approvalWaitMs: number;
  /**
   * MCP Tasks: given, the server offers task-augmented `tools/call` (and `tasks/get`,
   * `tasks/result`, `tasks/list`, `tasks/cancel`), a call that waits for a person answered at
   * once as a task.
   */
  tasks?: McpTaskDeps;
  /** Given, the same waiting write sent again without a call id of its own joins the first. */
  joins?: PendingCallJoins;
  /** Called with faults (never agent errors), for the log. */
  onFault?: (err: unknown) => void;
  /**
   * Who the key speaks for now, asked before every request. A stdio server lives as long as
   * its client, which may outlive the key: a revoked key must stop there too, and narrowed
   * settings apply. Absent: the principal given stays (an HTTP request's server lives for one
   * request).
   */
  principalNow?: () => Promise<Principal | undefined>;
  /** Which input schemas `tools/list` gives (default agentdb's own). */
  schemas?: SchemaVariant;
}

/**
 * The `_meta` key of `tools/call` params under which an MCP client names its own call id (the
 * spec's `_meta` takes prefixed keys for an implementation's own use). With it, a call is the
 * caller's idempotency key as on every other surface: sent again, the same call answers the
 * first one's outcome; another call under the id answers IDEMPOTENCY_CONFLICT.
 */
export const CALL_ID_META = 'agentdb/callId';

/** The answer to any request once the key no longer works. */
const keyGone = () => new McpError(-32001, 'Unauthorized: the key is no longer an active agent or member key.');

/**
 * An MCP server speaking for one key's principal: `tools/list` shows what it may see on this
 * endpoint, `tools/call` goes through the same keyed-call core as `/v1/calls` (policy, call
 * keys, approvals). A tool not listed here is unknown here, whatever it is elsewhere.
 */
export function mcpServer(principal: Principal, endpoint: McpEndpoint, deps: McpServerDeps): Server {
  const tasks = deps.tasks ? new RedisTaskStore(deps.tasks, principal) : undefined;
  const server = new Server(
    { name: 'agentdb', version: '0.1.0' },
    {
      capabilities: { tools: {}, ...(tasks ? { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } } : {}) },
      jsonSchemaValidator: sharedValidator(),
      ...(tasks ? { taskStore: tasks } : {}),
    },
  );
  // tasks/result waits for the call itself, as tools/call does: the SDK's own handler polls the
  // store each pollInterval and never lets go, which held a stopping server's close until its
  // drain grace ran out.
  if (tasks)
    server.setRequestHandler(GetTaskPayloadRequestSchema, (request, extra) => tasks.awaitResult(request.params.taskId, deps.approvalWaitMs, extra.signal));
  const current = async (): Promise<Principal> => {
    if (!deps.principalNow) return principal;
    const now = await deps.principalNow();
    if (!now) throw keyGone();
    return now;
  };

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const tools = toolsFor(await current(), endpoint, deps.schemas);
    // A tool whose calls can wait for a person may be called as a task; the others answer at once.
    return { tools: tasks ? tools.map((t) => (MAY_PARK.has(t.name) ? { ...t, execution: { taskSupport: 'optional' as const } } : t)) : [...tools] };
  });

  type CallToolHandler = Parameters<typeof server.setRequestHandler<typeof CallToolRequestSchema>>[1];
  const callTool: CallToolHandler = async (request, extra) => {
    const { name, arguments: args, _meta: meta } = request.params;
    // A client that asked for a task gets one whatever the call answers; `tasks` is always there
    // then (the SDK refuses a task-augmented request when the server declared no tasks).
    const asTask = request.params.task !== undefined && tasks !== undefined;
    const reply = async (result: McpToolResult, callId: string, ok: boolean): Promise<CallToolResult | CreateTaskResult> =>
      asTask ? { task: await tasks.start({ callId, result, ok }) } : result;
    // A call refused before it was taken (a bound: QUOTA_EXCEEDED, RATE_LIMITED; or UNAVAILABLE)
    // gets no task: each would be kept 48 h outside the budget that refused the call, and a
    // flood of them took a workspace to almost four times its budget (hostile review 18h, 3).
    // The SDK's client takes nothing but a task for a task request, so it is a protocol error.
    const untaken = (answer: CallAnswer | ApprovalRequiredAnswer): McpError | undefined => {
      if (!asTask || answer.ok || !('error' in answer) || !NOT_TAKEN.has(answer.error.code)) return undefined;
      return new McpError(ErrorCode.InternalError, `${answer.error.code}: ${answer.error.message}`);
    };
    // Redis away: no task can be kept either, so a task request is answered with the error itself.
    const unavailable = (id: string): CallToolResult => {
      if (asTask) throw new McpError(ErrorCode.InternalError, 'UNAVAILABLE: agentdb could not take the call; try again shortly.');
      return toolResult(errorEnvelope(id, name, 'UNAVAILABLE', 'agentdb could not take the call; try again shortly.'));
    };
    const callId = meta?.[CALL_ID_META];
    if (callId !== undefined && typeof callId !== 'string') {
      const refusal = errorEnvelope('', name, 'INVALID_ARGUMENTS', `_meta["${CALL_ID_META}"] must be a string (the call id), got ${JSON.stringify(callId)}.`);
      return reply(toolResult(refusal), '', false);
    }
    let principal: Principal;
    try {
      principal = await current();
    } catch (err) {
      if (err instanceof McpError) throw err;
      deps.onFault?.(err);
      return unavailable('');
    }
    // A protocol error, as the spec (2025-06-18 and later, tools) has it: no tool ran, and a
    // client checks the name it sent, not a result.
    const tool = toolsFor(principal, endpoint).find((t) => t.name === name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
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
      // The outcome is out: the window in which the same write joins this call ends. A refusal
      // for the moment (RATE_LIMITED, UNAVAILABLE) is no outcome: the call may still wait.
      if (joinKey && held && !pending && !isTransient(answer)) await deps.joins!.forget(joinKey, held);
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
      return unavailable(callId ?? '');
    }
  };
  // Registered as Protocol registers any handler (the request parsed against CallToolRequestSchema
  // first, a failure answered as before) rather than through Server's override for tools/call,
  // which (SDK 1.32) parses the already parsed request against the same schema a second time
  // and then the result against CallToolResultSchema. Every result here is toolResult's, which
  // that parse returns unchanged, and a bad request is refused by the first parse as before
  // (test/unit/mcp-server-registration.test.ts); the two parses only added CPU and a few KB of
  // garbage to every /mcp call (an /mcp request allocates about 46 KB with a stub call behind it).
  const tracer = deps.calls.tracer;
  // With tracing on, each call is a `tools/call <tool>` server span (MCP semantic conventions)
  // continuing the trace its `_meta` names; the client's `execute_tool` span runs inside it.
  const traced: CallToolHandler = tracer
    ? (request, extra) => {
        const meta = request.params._meta as Record<string, unknown> | undefined;
        const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
        const parent = traceparentContext(str(meta?.traceparent), str(meta?.tracestate));
        return mcpToolCallSpan(tracer, { tool: request.params.name, requestId: extra.requestId }, parent, () => Promise.resolve(callTool(request, extra)));
      }
    : callTool;
  Protocol.prototype.setRequestHandler.call(server, CallToolRequestSchema, traced);
  return server;
}

/** The refusals of a call that was never taken: no outcome to keep a task for. */
const NOT_TAKEN: ReadonlySet<string> = new Set(['QUOTA_EXCEEDED', 'RATE_LIMITED', 'UNAVAILABLE']);

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

/**
 * One JSON Schema validator for every server of the process. The SDK makes a new Ajv per
 * server unless given one, which cost about a millisecond per stateless `/mcp` request, for a
 * validator a tools-only server never uses (it validates elicitation answers).
 */
let validator: AjvJsonSchemaValidator | undefined;
function sharedValidator(): AjvJsonSchemaValidator {
  validator ??= new AjvJsonSchemaValidator();
  return validator;
}
