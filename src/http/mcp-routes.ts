import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { NAME_PATTERN } from '../contracts/name-pattern.ts';
import { AgentDbError } from '../errors.ts';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestId } from '@modelcontextprotocol/sdk/types.js';
import { mcpInfoServer, mcpServer, type McpServerDeps } from '../mcp/server.ts';
import { mcpToolCall } from '../mcp/tool-call.ts';
import { chargeMcpRequest, rpcErrorOf } from '../mcp/request-charge.ts';
import type { McpEndpoint } from '../mcp/toolkit.ts';
import type { KeyedCalls } from '../calls/bearer-key-calls.ts';
import type { KeyAuthenticator, Principal } from '../registry/principal.ts';
import { clientGone } from './client-gone.ts';
import { checkedPost, McpExchange, type McpHttpAnswer, type McpHttpPost, UNSUPPORTED_MEDIA_TYPE } from './mcp-exchange.ts';
import { answerFastToolCall, fastToolCall } from './mcp-fast-call.ts';
import { McpBearer } from './oauth/mcp-bearer.ts';
import type { OAuthDeps } from './oauth/oauth-deps.ts';
import { mcpOriginRefusal, type McpOriginPolicy } from './mcp-origin-check.ts';

/** What the MCP endpoint needs. */
export interface McpRoutesDeps {
  auth: KeyAuthenticator;
  calls: KeyedCalls;
  approvalWaitMs: number;
  /** OAuth sign-in: access tokens for these endpoints are taken beside keys. */
  oauth?: OAuthDeps;
  /** Hosts and browser origins besides loopback (MCP_ALLOWED_HOSTS, MCP_ALLOWED_ORIGINS); absent: loopback only. */
  origins?: McpOriginPolicy;
  /** MCP Tasks and resends that join a waiting call (see `McpServerDeps`); absent, neither. */
  waiting?: Pick<McpServerDeps, 'tasks' | 'joins'>;
  /**
   * False: every POST goes the SDK's way, the plain `tools/call` too (default true: that one
   * takes the fast path, mcp-fast-call.ts). Only the test that holds both paths to the same
   * answers sets it.
   */
  fastPath?: boolean;
}

/**
 * The largest JSON-RPC body taken: a call's SQL is at most 100 KB and its params are bounded,
 * so anything far past that is not a tool call.
 */
const MAX_BODY_BYTES = 512 * 1024;

/** JSON-RPC error codes the endpoint answers with (the SDK's own for the rest). */
const RPC = {
  parseError: -32700,
  invalidRequest: -32600,
  unauthorized: -32001,
  forbidden: -32003,
  internal: -32603,
  dnsRebinding: -32000,
  unavailable: -32000,
} as const;

/**
 * What a request the key of which cannot be checked is told: without the outage's detail, whose
 * advice to the operator (start Redis, REDIS_URL) no MCP client can follow.
 */
const KEY_UNCHECKED = 'Service unavailable: agentdb cannot check the key now (its Redis does not answer); nothing was run. Retry in a few seconds.';

/** A JSON-RPC error response: under the request's id when it is known, else null. */
function rpcBody(code: number, message: string, id: RequestId | null = null, data?: unknown): unknown {
  return { jsonrpc: '2.0', error: { code, message, ...(data !== undefined ? { data } : {}) }, id };
}

function rpcError(reply: FastifyReply, status: number, code: number, message: string): FastifyReply {
  return sendJson(reply, status, rpcBody(code, message));
}

/**
 * Answers `body` as JSON typed `application/json` exactly, as the SDK's own transport types it
 * (JSON has no charset parameter: RFC 8259 §11). Given an object, or a string typed JSON,
 * Fastify appends `; charset=utf-8`, which every MCP client's SDK then parses back out of each
 * answer (`content-type`'s parameter loop, ~0.7 µs against ~0.1 µs for the bare type); a reply
 * with a serializer of its own is sent with the type it was given. The JSON goes as a string,
 * not a Buffer: Node's HTTP writes a string body and its head as one string in one `write`,
 * where a Buffer body goes beside the head in a `writev` of two (docs/benchmarks.md, session 25:
 * ~0.1 ms more of the server's time per answer on a loaded 2-core machine).
 */
function sendJson(reply: FastifyReply, status: number, body: unknown): FastifyReply {
  return reply.code(status).header('content-type', 'application/json').serializer(asIs).send(JSON.stringify(body));
}

/** The serializer of a reply whose payload is its JSON already. */
const asIs = (payload: unknown): string => payload as string;

/**
 * `POST /mcp` (the workspace endpoint), `POST /mcp/w/<workspace>` (the same, pinned to a
 * workspace: another workspace's key is refused) and `POST /mcp/t/<team>` (a team endpoint,
 * without the data toolkit): MCP over Streamable HTTP, stateless, one server per request for
 * the bearer key's principal (none for a plain `tools/call`: mcp-fast-call.ts). Every failure answers a JSON-RPC error, never a stack or a hint of
 * which keys or workspaces exist.
 */
export function mcpRoutes(deps: McpRoutesDeps): FastifyPluginAsync {
  return async (app) => {
    const bearer = new McpBearer(deps.auth, deps.oauth);
    app.setErrorHandler((err: FastifyError, request, reply) => {
      const status = err.statusCode ?? 500;
      if (status === 413) return rpcError(reply, 413, RPC.invalidRequest, `The request body is larger than ${MAX_BODY_BYTES} bytes.`);
      if (status === 415) return rpcError(reply, 415, UNSUPPORTED_MEDIA_TYPE.code, UNSUPPORTED_MEDIA_TYPE.message);
      if (status >= 400 && status < 500) return rpcError(reply, 400, RPC.parseError, 'The request body is not valid JSON.');
      request.log.error({ err, route: request.routeOptions.url }, 'mcp request failed');
      return rpcError(reply, 500, RPC.internal, 'Internal error.');
    });

    // Before the key is looked at: a page rebound to this address learns nothing, not even
    // whether a key it guessed works.
    const origins = deps.origins ?? { hosts: [], origins: [] };
    // Not async: a promise and a turn of the microtask queue per request for a check that never waits.
    app.addHook('onRequest', (request, reply, done) => {
      const refusal = mcpOriginRefusal(request, origins);
      if (refusal) rpcError(reply, 403, RPC.dnsRebinding, `Forbidden: ${refusal}`);
      else done();
    });

    const faultLog = (request: FastifyRequest) => (err: unknown) => request.log.error({ err: String(err) }, 'mcp tool call failed');
    /** What a request's SDK server needs (not built for a plain tools/call, which needs none). */
    const serverDeps = (request: FastifyRequest): McpServerDeps => ({
      calls: deps.calls,
      approvalWaitMs: deps.approvalWaitMs,
      ...deps.waiting,
      // `?schemas=strict`: input schemas OpenAI strict function calling accepts.
      schemas: (request.query as { schemas?: unknown } | undefined)?.schemas === 'strict' ? 'strict' : 'own',
      onFault: faultLog(request),
    });

    /** One POST answered by an SDK server of its own (stateless: one per request), or 499 for a client gone. */
    const serve = async (server: Server, post: McpHttpPost, gone: AbortSignal): Promise<McpHttpAnswer> => {
      const exchange = new McpExchange();
      // Gone already (during the key's lookup): no exchange to start for nobody.
      if (gone.aborted) return { status: 499 };
      // A client gone before its answer: stop the server (it aborts the handlers' signals).
      // After the answer nothing of the exchange is left to stop (`clientGone` does not fire),
      // and closing would only build the SDK's ConnectionClosed error, stack and all.
      gone.addEventListener('abort', () => void server.close(), { once: true });
      await server.connect(exchange);
      return exchange.handle(post);
    };

    /**
     * A POST whose key could not be checked: Redis does not answer (`err`). A client refused
     * `initialize`, `tools/list` or `ping` shows the server as broken and may not try again by
     * itself, where a tool call's UNAVAILABLE is a result its model reads and retries. So a plain
     * `tools/call` answers the tool's UNAVAILABLE (its `mayStillRun` says whether an earlier send
     * under the client's call id may have run: tool-call.ts, review F4); `initialize`, `ping` and
     * notifications, which say nothing of a key or its data, are answered; `tools/list` lists the
     * tools of what the key was last found to be, when this process saw it lately
     * (`PrincipalCache.lastKnown`). Anything else: 503, a JSON-RPC error under the request's id
     * saying the service is unavailable, nothing ran, and to retry (`data.code` UNAVAILABLE).
     */
    const whileKeyUnchecked = async (request: FastifyRequest, at: McpEndpoint, err: AgentDbError, gone: AbortSignal): Promise<McpHttpAnswer> => {
      const post = { headers: request.headers, body: request.body };
      const fast = fastToolCall(post, deps.fastPath !== false);
      if (fast && !('invalid' in fast)) {
        const run = mcpToolCall(at, { calls: deps.calls, approvalWaitMs: deps.approvalWaitMs, joins: deps.waiting?.joins }, async () => {
          throw err;
        });
        return answerFastToolCall(fast, run, gone);
      }
      const checked = checkedPost(post);
      if ('refusal' in checked) return { status: checked.refusal.status, body: rpcBody(checked.refusal.code, checked.refusal.message) };
      const message = checked.message;
      const method = 'method' in message ? message.method : undefined;
      if (method === undefined || !('id' in message) || method === 'initialize' || method === 'ping')
        return serve(mcpInfoServer(deps.waiting ?? {}), post, gone);
      const known = method === 'tools/list' ? bearer.lastKnown(request) : undefined;
      if (known) return serve(mcpServer(known, at, serverDeps(request)), post, gone);
      return { status: 503, body: rpcBody(RPC.unavailable, KEY_UNCHECKED, message.id, { code: 'UNAVAILABLE', retryable: true }) };
    };

    /** What each request's key was found to be before its body was read, by {@link keyChecked}. */
    const checkedKeys = new WeakMap<FastifyRequest, { principal: Principal } | { unchecked: AgentDbError }>();
    /**
     * The key's check, before the body is read: an unknown key or token is refused without its
     * body parsed (up to MAX_BODY_BYTES of JSON: 1.2 ms of the server's CPU a refusal at 400 KB
     * against /v1/calls' 0.75, which refused before the body already; hostile review T18). A key
     * that Redis cannot check now is told apart by the body (`whileKeyUnchecked`), so it goes on.
     */
    const keyChecked = async (request: FastifyRequest, reply: FastifyReply) => {
      try {
        const principal = await bearer.principal(request);
        if (principal) {
          checkedKeys.set(request, { principal });
          return;
        }
      } catch (err) {
        if (!(err instanceof AgentDbError) || err.code !== 'UNAVAILABLE') throw err;
        checkedKeys.set(request, { unchecked: err });
        return;
      }
      reply.header('www-authenticate', bearer.challenge(request));
      return rpcError(reply, 401, RPC.unauthorized, bearer.refusal(request));
    };

    const handle =
      (endpoint: (req: FastifyRequest) => McpEndpoint | undefined, workspaceOf?: (req: FastifyRequest) => string) =>
      async (request: FastifyRequest, reply: FastifyReply) => {
        // A client gone already (during the key's lookup or its body) aborts it at once.
        const gone = clientGone(reply);
        const send = (answer: McpHttpAnswer) => (answer.body === undefined ? reply.code(answer.status).send() : sendJson(reply, answer.status, answer.body));
        const checked = checkedKeys.get(request);
        if (!checked) throw new Error('mcp: a POST reached its handler without its key checked');
        if ('unchecked' in checked) {
          const at = endpoint(request);
          if (!at) return rpcError(reply, 503, RPC.unavailable, KEY_UNCHECKED);
          return send(await whileKeyUnchecked(request, at, checked.unchecked, gone));
        }
        const principal = checked.principal;
        // The same answer whether or not the named workspace exists.
        if (workspaceOf && workspaceOf(request) !== principal.workspace)
          return rpcError(reply, 403, RPC.forbidden, 'Forbidden: this key is not for this endpoint.');
        const at = endpoint(request);
        if (!at) return rpcError(reply, 404, RPC.invalidRequest, 'No such endpoint.');
        const post = { headers: request.headers, body: request.body };
        // A plain tools/call skips the SDK Server (why: mcp-fast-call.ts), answering the same.
        const fast = fastToolCall(post, deps.fastPath !== false);
        if (fast && 'invalid' in fast) return send(fast.invalid);
        if (fast) {
          const onFault = faultLog(request);
          const run = mcpToolCall(at, { calls: deps.calls, approvalWaitMs: deps.approvalWaitMs, joins: deps.waiting?.joins, onFault }, async () => principal);
          return send(await answerFastToolCall(fast, run, gone));
        }
        // Counted in the principal's own bucket (request-charge.ts); a count Redis could not make
        // lets the request through: it runs no call, and connecting must work in an outage.
        const refused = await chargeMcpRequest(deps.calls, principal, request.body).catch(() => undefined);
        if (refused) {
          const body = rpcErrorOf(refused, request.body);
          reply.header('retry-after', String((refused.data as { retryAfter: number }).retryAfter));
          // A request's refusal is its response (as a task follow-up's is); a notification has none, so HTTP says it.
          return sendJson(reply, body.id === null ? 429 : 200, body);
        }
        return send(await serve(mcpServer(principal, at, serverDeps(request)), post, gone));
      };

    const workspace = () => ({ kind: 'workspace' }) as const;
    const team = (req: FastifyRequest) => {
      const t = (req.params as { team: string }).team;
      return NAME_PATTERN.test(t) ? ({ kind: 'team', team: t } as const) : undefined;
    };
    const opts = { bodyLimit: MAX_BODY_BYTES, onRequest: keyChecked };
    app.post('/mcp', opts, handle(workspace));
    app.post(
      '/mcp/w/:workspace',
      opts,
      handle(workspace, (req) => (req.params as { workspace: string }).workspace),
    );
    app.post('/mcp/t/:team', opts, handle(team));
    // Stateless: no server-initiated stream to open (GET) and no session to end (DELETE).
    for (const url of ['/mcp', '/mcp/w/:workspace', '/mcp/t/:team']) {
      app.route({
        method: ['GET', 'DELETE'],
        url,
        handler: (_req, reply) => rpcError(reply.header('allow', 'POST'), 405, RPC.invalidRequest, 'Method not allowed: POST JSON-RPC messages.'),
      });
    }
  };
}
