import {
  CallToolRequestSchema,
  type CallToolRequest,
  ErrorCode,
  type JSONRPCRequest,
  RELATED_TASK_META_KEY,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import type { McpToolCall } from '../mcp/tool-call.ts';
import { checkedPost, type McpHttpAnswer, type McpHttpPost, plainRequest } from './mcp-exchange.ts';

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
  // The common call, told by looking at it rather than by the two schema parses below (each
  // copies the message): whatever the looks do not vouch for goes through the parses.
  const plain = plainRequest(post, 'tools/call');
  const request = plain && plainToolCall(plain);
  if (plain && request) return fast ? { id: plain.id, request } : undefined;
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

/**
 * The request as `CallToolRequestSchema`'s parse gives it, when its params plainly pass that
 * schema (and so `JSONRPCMessageSchema`'s, whose params schema is looser): a tool name,
 * arguments that are a plain object, a `_meta` of keys the SDK gives no meaning to (no progress
 * token, no related task; agentdb's call id is one of the others) and nothing else; undefined
 * leaves it to the schemas (a task, a progress token, anything odd). The parse copies each
 * object it checks (~2.4 KB and ~1 µs per call); the handler only reads the request, so it is
 * given the body's own objects, which nothing else holds.
 */
function plainToolCall(m: JSONRPCRequest): CallToolRequest | undefined {
  const params: unknown = m.params;
  if (!isPlainObject(params)) return undefined;
  for (const key in params) if (key !== 'name' && key !== 'arguments' && key !== '_meta') return undefined;
  if (typeof params.name !== 'string') return undefined;
  if (params.arguments !== undefined && !isPlainObject(params.arguments)) return undefined;
  const meta = params._meta;
  if (meta !== undefined && (!isPlainObject(meta) || 'progressToken' in meta || RELATED_TASK_META_KEY in meta)) return undefined;
  return { method: 'tools/call', params: params as CallToolRequest['params'] };
}

/** What JSON gives for an object (zod's record and object schemas take these). */
function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
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
