import { CallToolRequestSchema, type CallToolRequest, ErrorCode, type RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { McpToolCall } from '../mcp/tool-call.ts';
import { checkedPost, type McpHttpAnswer, type McpHttpPost } from './mcp-exchange.ts';

/** A `tools/call` the fast path answers: the request as the SDK's handler would be given it. */
export interface FastToolCall {
  id: RequestId;
  request: CallToolRequest;
}

/**
 * The POST's `tools/call`, when `/mcp`'s fast path may answer it; undefined sends the POST down
 * the SDK path (an SDK `Server` and an `McpExchange`), which answers everything else.
 *
 * Why the SDK is skipped here: stateless `/mcp` built an SDK `Server`, connected it to a
 * transport and ran the SDK's dispatch (its message type guards, each a schema parse, an abort
 * controller and a closure set per request) for every call, ~0.18 ms of the server's CPU per
 * call under load (docs/benchmarks.md), where a tool call needs none of it: no session, no
 * `initialize` state, nothing sent to the client. So the common case — one JSON-RPC `tools/call`
 * request, no task asked for, that passes the transport's checks and `CallToolRequestSchema` —
 * runs the very handler the SDK `Server` runs (src/mcp/tool-call.ts) and answers as the SDK's
 * `Protocol` does (its `_onrequest`, SDK 1.32): the result, or the thrown error's code, message
 * and data. Anything else (a refusal, another method, a task, a request the schema rejects) goes
 * the SDK's way, so its answer stays the SDK's own; test/integration/mcp-fast-path.test.ts holds
 * the two paths to the same bytes.
 */
export function fastToolCall(post: McpHttpPost, fast = true): FastToolCall | { invalid: McpHttpAnswer } | undefined {
  let checked: ReturnType<typeof checkedPost>;
  try {
    checked = checkedPost(post);
  } catch {
    return undefined;
  }
  if ('refusal' in checked) return undefined;
  const m = checked.message;
  if (!('method' in m) || m.method !== 'tools/call' || !('id' in m)) return undefined;
  const parsed = CallToolRequestSchema.safeParse(m);
  // The SDK answers a tools/call whose params its schema refuses -32603 with zod's issues as
  // JSON; JSON-RPC's code for bad params is -32602 (review R28), on either path.
  if (!parsed.success) return { invalid: invalidParams(m.id, parsed.error.issues) };
  // A task-augmented call: the SDK checks the server's task capability and keeps a task.
  if (!fast || (m.params && 'task' in m.params)) return undefined;
  return { id: m.id, request: parsed.data };
}

/** The SDK transport's answer to a request whose client went away before it was answered. */
const GONE: McpHttpAnswer = { status: 404, body: { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null } };

/**
 * Runs the call's handler and answers as the SDK's `Protocol` answers a request: `{ result,
 * jsonrpc, id }`, or `{ jsonrpc, id, error }` with the thrown error's code when it is an integer
 * (an `McpError`), else InternalError. `signal` aborts when the client has gone.
 */
export async function answerFastToolCall(call: FastToolCall, run: McpToolCall, signal: AbortSignal): Promise<McpHttpAnswer> {
  try {
    const result = await run(call.request, { signal, requestId: call.id });
    if (signal.aborted) return GONE;
    return { status: 200, body: { result, jsonrpc: '2.0', id: call.id } };
  } catch (error) {
    if (signal.aborted) return GONE;
    const e = error as { code?: unknown; message?: unknown; data?: unknown };
    const code = Number.isSafeInteger(e.code) ? e.code : ErrorCode.InternalError;
    return {
      status: 200,
      body: { jsonrpc: '2.0', id: call.id, error: { code, message: e.message ?? 'Internal error', ...(e.data !== undefined && { data: e.data }) } },
    };
  }
}

/** JSON-RPC's Invalid params, naming each refused field in a line a person can read. */
function invalidParams(id: RequestId, issues: readonly { path: PropertyKey[]; message: string }[]): McpHttpAnswer {
  const what = issues.map((i) => `${i.path.length ? i.path.map(String).join('.') : 'params'}: ${i.message}`).join('; ');
  return { status: 200, body: { jsonrpc: '2.0', id, error: { code: ErrorCode.InvalidParams, message: `Invalid params: ${what}` } } };
}
