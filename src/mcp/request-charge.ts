import { ErrorCode, type McpError } from '@modelcontextprotocol/sdk/types.js';
import type { KeyedCalls } from '../calls/bearer-key-calls.ts';
import type { Principal } from '../registry/principal.ts';
import { rateLimitedError } from './task-record.ts';

// Which MCP requests a principal's bucket of requests that run no call counts
// (`MCP_REQUESTS_PER_MINUTE`, src/calls/call-rate-limits.ts): everything but `tools/call`, which
// its call rates count, and the task requests, which their handlers count (follow-ups in their own
// bucket, `tasks/list` as a lookup). Uncounted, one key spun `tools/list` at 233 a second (1.4 ms of the
// server's CPU each, a whole core) or `ping` at 1,049, charged to nobody (session 32, T9).

/**
 * The methods counted elsewhere: a call by its call rates, the task requests by their handlers. Any
 * other `tasks/…` is a method not served, counted here. What is refused before its handler counts
 * (a `tools/call` or `tasks/get` without its parameters) costs the server about what a refusal here
 * does (130-350 µs against 210-250), so it is left uncounted.
 */
const COUNTED_ELSEWHERE: ReadonlySet<string> = new Set(['tools/call', 'tasks/get', 'tasks/result', 'tasks/cancel', 'tasks/list']);

/** Whether a POST whose body is `body` is counted as an MCP request that runs no call. */
export function countedAsRequest(body: unknown): boolean {
  const method = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as { method?: unknown }).method : undefined;
  return typeof method !== 'string' || !COUNTED_ELSEWHERE.has(method);
}

/**
 * Counts one such request of `principal` when {@link countedAsRequest} says so: the protocol error
 * to answer with past its bucket (-32600, RATE_LIMITED and the seconds to wait, as a task
 * follow-up's refusal), else undefined.
 */
export async function chargeMcpRequest(calls: KeyedCalls, principal: Principal, body: unknown): Promise<McpError | undefined> {
  if (!countedAsRequest(body)) return undefined;
  const limited = await calls.chargeMcpRequest(principal);
  return limited ? rateLimitedError(limited, principal.workspace, 'an MCP request') : undefined;
}

/** The JSON-RPC error `err` as a response to the POST's request (its id, or null for a notification). */
export function rpcErrorOf(
  err: McpError,
  body: unknown,
): { jsonrpc: '2.0'; id: string | number | null; error: { code: number; message: string; data?: unknown } } {
  const id = typeof body === 'object' && body !== null ? (body as { id?: unknown }).id : undefined;
  return {
    jsonrpc: '2.0',
    id: typeof id === 'string' || typeof id === 'number' ? id : null,
    error: { code: err.code ?? ErrorCode.InvalidRequest, message: err.message, ...(err.data !== undefined ? { data: err.data } : {}) },
  };
}
