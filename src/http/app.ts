import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { ApprovalService } from '../approvals/approval-service.ts';
import type { MemberRegistry } from '../registry/members.ts';
import { AgentDbError, httpStatusOf } from '../errors.ts';
import { createLogger, type Logger } from '../logger.ts';
import type { KeyedCalls } from '../calls/bearer-key-calls.ts';
import { isConnectionFault } from '../redis/connection.ts';
import type { KeyAuthenticator } from '../registry/principal.ts';
import { approvalsRoutes } from './approvals-routes.ts';
import { historyRoutes } from './history-routes.ts';
import type { RestoreOnce } from '../shards/restore-once.ts';
import type { HistoryClient } from '../shards/history-client.ts';
import { callsRoutes } from './calls-routes.ts';
import type { McpOriginPolicy } from './mcp-origin-check.ts';
import { mcpRoutes, type McpRoutesDeps } from './mcp-routes.ts';
import { resultsRoutes } from './results-routes.ts';
import type { OffloadedResults } from '../blobs/offloaded-results.ts';
import { sendError, sendRefusal } from './error-reply.ts';
import { validateWithZod } from './route-validation.ts';
import { healthRoutes, type ReadinessDeps } from './health-routes.ts';
import { metricsRoute } from './metrics-route.ts';
import type { Metrics } from '../metrics.ts';
import { webRoutes, type WebDeps } from './web/web-routes.ts';
import type { OAuthDeps } from './oauth/oauth-deps.ts';
import { oauthRoutes } from './oauth/oauth-routes.ts';
import { bodyDeadline, type ConnectionLimits, DEFAULT_CONNECTION_LIMITS, limitConnections } from './connection-limits.ts';

/** What the HTTP app reads; the processes it reports on are passed in, never created here. */
export interface AppDeps {
  redis: Redis;
  /** The shards this process's workers own, when it runs any. */
  ownedShards?: () => number[];
  /** What `GET /ready` asks beyond Redis (see health-routes.ts); absent: ready whenever Redis answers. */
  readiness?: ReadinessDeps;
  shardCount: number;
  /** Who may call the `/v1` API: bearer keys resolve to members here. */
  members: MemberRegistry;
  /** The approval core that `/v1/approvals` lists and decides through. */
  approvals: ApprovalService;
  /** Where request errors are logged; silent when absent (tests). */
  logger?: Logger;
  /** Point-in-time history (`/v1/databases/:db/history`, `…/restore`); those routes exist only when given. */
  history?: HistoryClient;
  /** Restores sent with an `Idempotency-Key` (`POST /v1/databases/:db/restore`) answered once; absent, the header is ignored. */
  restoreOnce?: RestoreOnce;
  /** Tool calls with bearer keys (`/v1/calls`, `/mcp`); those routes exist only when given. */
  keyed?: KeyedDeps;
  /** The web page at `/` (inbox, data, export, history); absent, only the API is served. */
  web?: WebDeps;
  /** What `GET /metrics` serves, and the token it asks for (METRICS_TOKEN); absent, the route says it is off. */
  metrics?: { metrics: Metrics; token?: string };
  /** Fastify's `trustProxy` (config TRUST_PROXY): whose X-Forwarded-* headers to believe. */
  trustProxy?: boolean | number | string[];
  /**
   * OAuth sign-in for people's MCP clients (metadata, registration, tokens; consent on the web
   * page): only with `web` and `keyed`, which it signs in to and serves.
   */
  oauth?: OAuthDeps;
  /** Slow and piled-up connections (see connection-limits.ts); tests lower them. */
  connections?: Partial<ConnectionLimits>;
}

/** What the key-authenticated routes need. */
export interface KeyedDeps {
  auth: KeyAuthenticator;
  calls: KeyedCalls;
  /** The longest a `/v1/calls` request waits (HTTP_WAIT_MS). */
  waitMs: number;
  /** The longest an MCP tool call waits for a decision (MCP_APPROVAL_WAIT_MS). */
  approvalWaitMs: number;
  /** Hosts and browser origins `/mcp` answers besides loopback (see mcp-origin-check.ts). */
  mcpOrigins?: McpOriginPolicy;
  /** MCP Tasks and resends that join a waiting call over `/mcp`; absent, neither is offered. */
  mcpWaiting?: McpRoutesDeps['waiting'];
  /** Query results offloaded to the blob store (`GET /v1/results/:id`); the route exists only when given. */
  results?: OffloadedResults;
}

/**
 * Builds the Fastify app without listening, so tests can `inject()` requests.
 * `GET /health` (liveness) and `GET /ready` (readiness) are health-routes.ts; `/v1/approvals` is the
 * approvals API (see approvals-routes.ts). Every error answers `{ error: { code, message, hint } }`.
 */
export function buildApp(deps: AppDeps): FastifyInstance {
  // Request logging is off: an access log adds nothing the error log lacks, and it would be
  // one more place an Authorization header could leak from if a serializer ever changed.
  const logger = (deps.logger ?? createLogger('silent', 'agentdb-http')) as FastifyBaseLogger;
  const limits = { ...DEFAULT_CONNECTION_LIMITS, ...deps.connections };
  const app = Fastify({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: true }),
    trustProxy: (deps.trustProxy ?? false) as boolean,
    requestTimeout: limits.requestTimeoutMs,
    http: { connectionsCheckingInterval: limits.checkEveryMs },
  });
  limitConnections(app.server, limits, Boolean(deps.trustProxy));
  // A request's body within its timeout; an answer sent before its body keeps the connection only for a body announced within the route's limit.
  bodyDeadline(app, limits.requestTimeoutMs, limits.checkEveryMs);
  // (Fastify takes a hop count too, as proxy-addr does; the cast only picks its HTTP/1 overload.)
  // Route input is zod, checked by Fastify before each handler; a failure reaches the error
  // handler below as INVALID_ARGUMENTS.
  validateWithZod(app);

  app.register(healthRoutes({ redis: deps.redis, shardCount: deps.shardCount, ownedShards: deps.ownedShards, readiness: deps.readiness }));

  if (deps.metrics) app.register(metricsRoute(deps.metrics));

  const keyed = deps.keyed;
  const chargeLookup = keyed ? (workspace: string, member: string, points?: number) => keyed.calls.chargeMemberLookup(workspace, member, points) : undefined;
  app.register(approvalsRoutes({ members: deps.members, approvals: deps.approvals, ...(chargeLookup ? { chargeLookup } : {}) }));
  if (deps.history) {
    app.register(
      historyRoutes({
        members: deps.members,
        history: deps.history,
        ...(chargeLookup ? { chargeLookup } : {}),
        ...(deps.restoreOnce ? { restoreOnce: deps.restoreOnce } : {}),
      }),
    );
  }
  const oauth = deps.oauth && deps.web && deps.keyed ? deps.oauth : undefined;
  if (oauth) app.register(oauthRoutes(oauth));
  if (deps.keyed) {
    app.register(callsRoutes({ auth: deps.keyed.auth, calls: deps.keyed.calls, waitMs: deps.keyed.waitMs }));
    app.register(
      mcpRoutes({
        auth: deps.keyed.auth,
        calls: deps.keyed.calls,
        approvalWaitMs: deps.keyed.approvalWaitMs,
        ...(deps.keyed.mcpOrigins ? { origins: deps.keyed.mcpOrigins } : {}),
        ...(deps.keyed.mcpWaiting ? { waiting: deps.keyed.mcpWaiting } : {}),
        ...(oauth ? { oauth } : {}),
      }),
    );
    if (deps.keyed.results) app.register(resultsRoutes({ auth: deps.keyed.auth, results: deps.keyed.results, calls: deps.keyed.calls }));
  }

  if (deps.web) app.register(webRoutes({ ...deps.web, ...(oauth ? { oauth } : {}) }));

  app.setNotFoundHandler((request, reply) => {
    const url = request.url.split('?')[0]!;
    return sendError(reply, 'NOT_FOUND', `No route ${request.method} ${url}.${encodedIdHint(url)}`);
  });

  app.setErrorHandler((err: FastifyError, request, reply) => {
    if (err instanceof AgentDbError && httpStatusOf(err) < 500) return sendRefusal(reply, err);
    // A registry error the core answered (HISTORY_CORRUPT): its own code and status, not a fault of this route.
    if (err instanceof AgentDbError && err.code !== 'INTERNAL') {
      request.log.warn({ code: err.code, route: request.routeOptions.url }, 'request refused');
      return sendRefusal(reply, err);
    }
    // A command that died with its Redis connection is the service being away, not a fault of
    // agentdb's: a retryable 503, as the calls routes answer.
    if (isConnectionFault(err)) {
      request.log.warn({ err: err.message, route: request.routeOptions.url }, 'redis unavailable');
      return sendError(reply, 'UNAVAILABLE', `Redis did not answer: ${err.message}`);
    }
    const status = err.statusCode ?? 500;
    // Fastify's own 4xx (unparseable JSON, wrong content type, body too large) are the
    // caller's mistake: a coded INVALID_ARGUMENTS with Fastify's status and reason.
    if (status === 415)
      return sendError(reply, 'INVALID_ARGUMENTS', `${err.message}: send the body as JSON with the header content-type: application/json.`, status);
    if (status >= 400 && status < 500) return sendError(reply, 'INVALID_ARGUMENTS', err.message, status);
    request.log.error({ err, route: request.routeOptions.url }, 'request failed');
    return sendError(reply, err instanceof AgentDbError ? err.code : 'INTERNAL', err instanceof AgentDbError ? err.detail : undefined);
  });
  return app;
}

/**
 * `/v1/databases/acme/scout/history`: the database id's slash taken for a path separator, the
 * first thing a user of the history routes types.
 */
function encodedIdHint(url: string): string {
  const m = /^\/v1\/databases\/(.+)\/(history|restore)\/?$/.exec(url);
  if (!m || !m[1]!.includes('/')) return '';
  return ` A database id is one path segment, its slash URL-encoded: /v1/databases/${encodeURIComponent(decodeURIComponentSafe(m[1]!))}/${m[2]}.`;
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
