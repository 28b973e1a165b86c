import type { IncomingHttpHeaders } from 'node:http';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  isInitializeRequest,
  JSONRPCMessageSchema,
  type JSONRPCRequest,
  SUPPORTED_PROTOCOL_VERSIONS,
  type JSONRPCMessage,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';

/** What to answer one `POST /mcp` with: a status and, unless 202, a JSON body. */
export interface McpHttpAnswer {
  status: number;
  body?: unknown;
}

/** One POST's request as the exchange needs it: Fastify has read and parsed the body already. */
export interface McpHttpPost {
  headers: IncomingHttpHeaders;
  body: unknown;
}

/**
 * The SDK `Transport` of one stateless `POST /mcp` in JSON-response mode: it hands the JSON-RPC
 * messages Fastify parsed to the SDK `Server`, and answers with the server's responses once
 * every request of the POST has one.
 *
 * Written in place of the SDK's `StreamableHTTPServerTransport` (SDK 1.32): on Node that one
 * turns the IncomingMessage into a Web `Request`, hands a Web `Response` back and streams it out
 * through @hono/node-server, which with its Headers copies, URL parsing and web streams cost
 * more than the rest of a primary-key read's MCP layers together. agentdb uses none of what the
 * conversion is for (sessions, SSE streams, resumption). The HTTP-level checks are the SDK
 * transport's, in its order, with its status codes, JSON-RPC codes and messages (see
 * `WebStandardStreamableHTTPServerTransport.handlePostRequest`), but for batches, which it
 * still takes and MCP 2025-06-18 dropped: refused here. The protocol itself stays the SDK
 * `Server`'s.
 */
export class McpExchange implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport['onmessage'];

  /** Each request's response once sent, in the order of the POST's requests. */
  private readonly responses = new Map<RequestId, JSONRPCMessage | undefined>();
  private answer?: (a: McpHttpAnswer) => void;
  private closed = false;

  async start(): Promise<void> {}

  /**
   * Ends the exchange (the client went away, or the answer is out). A POST still waiting is
   * answered as the SDK answers one on a closed transport, so its handler does not hang on.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.answer?.(rpcErrorAnswer(404, -32001, 'Session not found'));
    this.onclose?.();
  }

  /**
   * Takes a response to one of the POST's requests; anything else the server sends (a
   * notification, a request to the client) has no stream to go on in JSON-response mode and
   * is dropped, as the SDK transport drops it.
   */
  async send(message: JSONRPCMessage): Promise<void> {
    // What the SDK Server sends is well formed: a response is what has a result or an error
    // (the SDK's guards would parse each message against its schema once more).
    if (!('result' in message) && !('error' in message)) return;
    if (message.id === undefined) throw new Error('Cannot send a response on a standalone SSE stream unless resuming a previous client request');
    if (!this.responses.has(message.id)) throw new Error(`No connection established for request ID: ${String(message.id)}`);
    this.responses.set(message.id, message);
    for (const r of this.responses.values()) if (r === undefined) return;
    const all = [...this.responses.values()];
    this.answer?.({ status: 200, body: all.length === 1 ? all[0] : all });
  }

  /** Checks one POST, hands its messages to the connected server and resolves with what to answer. */
  async handle(post: McpHttpPost): Promise<McpHttpAnswer> {
    try {
      const checked = checkedPost(post, this.closed);
      if ('refusal' in checked) {
        this.onerror?.(new Error(checked.refusal.message));
        return rpcErrorAnswer(checked.refusal.status, checked.refusal.code, checked.refusal.message);
      }
      const message = checked.message;
      const extra = { requestInfo: { headers: post.headers } };
      if (!isRequest(message)) {
        this.onmessage?.(message, extra);
        return { status: 202 };
      }
      this.responses.set(message.id, undefined);
      return await new Promise<McpHttpAnswer>((resolve) => {
        this.answer = resolve;
        this.onmessage?.(message, extra);
      });
    } catch (error) {
      this.onerror?.(error as Error);
      return rpcErrorAnswer(400, -32700, 'Parse error', String(error));
    }
  }
}

/** Why a POST is refused before any message reaches the server: its status, JSON-RPC code and message. */
export interface PostRefusal {
  status: number;
  code: number;
  message: string;
}

/**
 * A body that is not JSON, in the SDK transport's words: whether Fastify refused its content
 * type (no parser for it, mcp-routes.ts) or took it and {@link checkedPost} did (text/plain),
 * a client is told the same (review R28).
 */
export const UNSUPPORTED_MEDIA_TYPE: PostRefusal = { status: 415, code: -32000, message: 'Unsupported Media Type: Content-Type must be application/json' };

/**
 * The media types an Accept header names with a weight above zero, lowercased, parameters
 * dropped. Parsed rather than searched (review R28): `application/json;q=0` declines JSON
 * (RFC 9110, 12.5.1), and `text/event-stream-x` or `application/jsonx` are other types. A
 * wildcard range stays as written: it names neither type, as the SDK's check has it (the
 * transport must be told both). A weight that is not a number leaves its range out.
 */
function acceptedTypes(header: string | undefined): Set<string> {
  const types = new Set<string>();
  if (!header) return types;
  for (const range of header.split(',')) {
    const [type = '', ...params] = range.split(';');
    let weight = 1;
    for (const param of params) {
      const eq = param.indexOf('=');
      if (eq < 0 || param.slice(0, eq).trim().toLowerCase() !== 'q') continue;
      const q = param.slice(eq + 1).trim();
      weight = /^(0(\.\d{0,3})?|1(\.0{0,3})?)$/.test(q) ? Number(q) : 0;
    }
    const name = type.trim().toLowerCase();
    if (weight > 0 && name) types.add(name);
  }
  return types;
}

/** Whether an Accept header names both types the transport answers in (see {@link acceptedTypes}). */
function acceptsJsonAndEvents(header: string | undefined): boolean {
  // A client sends the same Accept on every POST: the last one's answer is kept.
  if (header !== lastAccept.header) {
    const types = acceptedTypes(header);
    lastAccept = { header, both: types.has('application/json') && types.has('text/event-stream') };
  }
  return lastAccept.both;
}
let lastAccept: { header: string | undefined; both: boolean } = { header: undefined, both: false };

/**
 * The HTTP-level checks of one POST, in the SDK transport's order (see {@link McpExchange}): the
 * one JSON-RPC message it carries, or why it is refused. `closed`: the exchange has ended already
 * (its client went away). `/mcp`'s fast path (mcp-fast-call.ts) checks a POST with it too.
 */
export function checkedPost(post: McpHttpPost, closed = false): { message: JSONRPCMessage } | { refusal: PostRefusal } {
  const refuse = (status: number, code: number, message: string) => ({ refusal: { status, code, message } });
  if (!acceptsJsonAndEvents(post.headers.accept)) {
    return refuse(406, -32000, 'Not Acceptable: Client must accept both application/json and text/event-stream');
  }
  if (!isJsonContentType(post.headers['content-type'])) return { refusal: UNSUPPORTED_MEDIA_TYPE };
  const raw = post.body;
  // JSON-RPC batches left MCP in 2025-06-18; no client of a later version sends one.
  if (Array.isArray(raw))
    return refuse(400, -32600, 'Invalid Request: JSON-RPC batches are not supported (MCP 2025-06-18 and later); send one message per POST');
  const parsed = JSONRPCMessageSchema.safeParse(raw);
  if (!parsed.success) return refuse(400, -32700, 'Parse error: Invalid JSON-RPC message');
  const message = parsed.data;
  if (closed) return refuse(404, -32001, 'Session not found');
  // The method is looked at first: the SDK's guard is a schema parse, for every message.
  if (!('method' in message && message.method === 'initialize' && isInitializeRequest(message))) {
    const version = post.headers['mcp-protocol-version'];
    if (version !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(String(version))) {
      const text = `Bad Request: Unsupported protocol version: ${String(version)} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`;
      return refuse(400, -32000, text);
    }
  }
  return { message };
}

/** The members JSON-RPC's request schema (the SDK's, strict) takes. */
const REQUEST_MEMBERS: ReadonlySet<string> = new Set(['jsonrpc', 'id', 'method', 'params']);

/**
 * The POST's request of `method` (not `initialize`), when it is plainly one: every check of
 * {@link checkedPost} passes, told by looking at the headers and the body's members rather than
 * by `JSONRPCMessageSchema`'s parse (~1 µs and ~1.4 KB of garbage on each `/mcp` call);
 * undefined for anything else, which {@link checkedPost} then decides. Every member but `params`
 * is checked as the SDK's strict request schema checks it; `params` is left to the caller, which
 * must vouch for them as strictly as that schema would (mcp-fast-call.ts) before the message
 * counts as taken.
 */
export function plainRequest(post: McpHttpPost, method: string): JSONRPCRequest | undefined {
  const headers = post.headers;
  if (!acceptsJsonAndEvents(headers.accept) || !isJsonContentType(headers['content-type'])) return undefined;
  const version = headers['mcp-protocol-version'];
  if (version !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(String(version))) return undefined;
  const body = post.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const m = body as Record<string, unknown>;
  if (m.jsonrpc !== '2.0' || m.method !== method || method === 'initialize') return undefined;
  // The schema's id: a string or a safe integer.
  if (typeof m.id !== 'string' && !Number.isSafeInteger(m.id)) return undefined;
  for (const key in m) if (!REQUEST_MEMBERS.has(key)) return undefined;
  return m as JSONRPCRequest;
}

function rpcErrorAnswer(status: number, code: number, message: string, data?: string): McpHttpAnswer {
  return { status, body: { jsonrpc: '2.0', error: { code, message, ...(data !== undefined ? { data } : {}) }, id: null } };
}

/**
 * Whether a message that passed `JSONRPCMessageSchema` is a request. Every branch of that union
 * is a strict object, and only a request has both a method and an id (a notification has no id,
 * a response no method), so the keys tell what the SDK's `isJSONRPCRequest` would, without a
 * second schema parse per message (each about 1.7 KB of garbage and a microsecond or two).
 */
function isRequest(m: JSONRPCMessage): m is JSONRPCRequest {
  return 'method' in m && 'id' in m;
}
