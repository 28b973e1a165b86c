import cookie from '@fastify/cookie';
import helmet from '@fastify/helmet';
import type { FastifyError, FastifyPluginAsync } from 'fastify';
import { AgentDbError, httpStatusOf } from '../../errors.ts';
import type { ApprovalService } from '../../approvals/approval-service.ts';
import type { MemberRegistry } from '../../registry/members.ts';
import type { DataBrowser } from '../../shards/data-browser.ts';
import type { KeyedCalls } from '../../calls/bearer-key-calls.ts';
import type { OAuthDeps } from '../oauth/oauth-deps.ts';
import { registerAssets } from './assets.ts';
import { activityRoutes } from './activity-routes.ts';
import { connectedAppsRoutes } from './connected-apps-routes.ts';
import { consentRoutes } from './consent-routes.ts';
import { dataRoutes } from './data-routes.ts';
import type { RestoreOnce } from '../../shards/restore-once.ts';
import { errorPage } from './error-page.ts';
import { historyPanel, historyRoutes, type HistoryAccess } from './history-routes.ts';
import { inboxRoutes } from './inbox-routes.ts';
import type { LiveEvents } from './live-events.ts';
import { signInRoutes } from './sign-in-routes.ts';
import { csrfMatches, loadMember, sameOrigin, signedOut } from './web-auth.ts';
import type { WebSessions } from '../../registry/web-sessions.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A web route reachable signed out (sign-in, assets). */
    public?: boolean;
  }
}

/** What the web page calls: the same cores as `/v1`, plus its sessions and live events. */
export interface WebDeps {
  members: MemberRegistry;
  approvals: ApprovalService;
  sessions: WebSessions;
  browser: DataBrowser;
  /** Drops are the signed-in member's own tool calls. */
  calls: KeyedCalls;
  events: LiveEvents;
  /** The history core; the history page says "not available" without it. */
  history?: HistoryAccess;
  /** The restore forms' one-time tokens: the same form sent twice restores once. */
  restoreOnce: RestoreOnce;
  /** How often an open `/inbox/events` stream pings and checks its member again (15 s). */
  heartbeatMs?: number;
  /** Live inbox streams open at once (`INBOX_STREAM_BOUNDS` when absent; tests set smaller ones). */
  inboxStreamBounds?: { perCaller: number; perWorkspace: number; total: number };
  /** OAuth sign-in: the consent page and Connected apps (set by buildApp from its own `oauth`). */
  oauth?: OAuthDeps;
}

/** Forms post `application/x-www-form-urlencoded`; URLSearchParams reads it (no plugin for 4 lines). */
const FORM_LIMIT = 64 * 1024;

/**
 * The web page at `/`: sign-in, approvals inbox, data browser, CSV export, history. Server
 * rendered HTML (every interpolation escaped, see html.ts) and one small script. Security
 * headers (CSP without inline scripts or styles), a session cookie (HttpOnly, SameSite=Strict)
 * and, on every POST, an Origin check plus the session's synchronizer token.
 */
export function webRoutes(deps: WebDeps): FastifyPluginAsync {
  return async (app) => {
    await app.register(cookie);
    await app.register(helmet, {
      contentSecurityPolicy: {
        useDefaults: false,
        directives: {
          defaultSrc: ["'self'"],
          scriptSrc: ["'self'"],
          styleSrc: ["'self'"],
          imgSrc: ["'self'", 'data:'],
          connectSrc: ["'self'"],
          formAction: ["'self'"],
          frameAncestors: ["'none'"],
          baseUri: ["'none'"],
          objectSrc: ["'none'"],
        },
      },
      // The page opens no cross-origin resources; the default COEP would only get in the way of downloads.
      crossOriginEmbedderPolicy: false,
      // Not helmet's no-referrer: under it a browser sends `Origin: null` on a form POST, and the
      // Origin check below could not tell the page's own forms from anyone's.
      referrerPolicy: { policy: 'same-origin' },
    });
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT }, (_req, body, done) => {
      // A name sent more than once (the inbox's ticked `ids`) is a list; once, a string, as always.
      const fields = new Map<string, string | string[]>();
      for (const [k, v] of new URLSearchParams(body as string)) {
        const had = fields.get(k);
        fields.set(k, had === undefined ? v : [...(Array.isArray(had) ? had : [had]), v]);
      }
      done(null, Object.fromEntries(fields));
    });

    // Open event streams would hold the server's close; they end first.
    app.addHook('preClose', async () => deps.events.close());

    app.addHook('onRequest', async (request, reply) => {
      if (request.url.startsWith('/assets/')) return;
      // Pages hold what agents stored and the session's token: a stored copy would outlive the
      // sign-out (Back on a shared computer shows the table again), so none is kept anywhere.
      reply.header('cache-control', 'no-store');
      await loadMember(request, deps.sessions, deps.members);
      if (request.routeOptions.config.public) return;
      if (!request.webMember) return signedOut(request, reply);
    });
    app.addHook('preHandler', async (request, reply) => {
      if (request.method !== 'POST' || request.routeOptions.config.public) return;
      if (!sameOrigin(request) || !csrfMatches(request)) {
        return reply.code(403).type('text/plain; charset=utf-8').send('This form is stale or was not sent from this site: reload the page and try again.');
      }
    });

    // A page's refusal or a bad query on a route that did not word its own (the connected apps, the
    // inbox's filters, a decision's form): the error page a person reads, not the API's JSON it
    // was (session 32, A3). Anyone who takes no HTML, and any fault of agentdb's own, is answered
    // by the app's handler, as the API answers it.
    app.setErrorHandler((err: FastifyError, request, reply) => {
      if (!(request.headers.accept ?? '').includes('text/html')) throw err;
      const refusal = err instanceof AgentDbError ? err : err.validation ? new AgentDbError('INVALID_ARGUMENTS', err.message) : undefined;
      if (!refusal || httpStatusOf(refusal) >= 500) throw err;
      const frame = {
        title: 'Not done',
        ...(request.webMember ? { member: request.webMember } : {}),
        ...(request.webSession ? { csrf: request.webSession.csrf } : {}),
      };
      return errorPage(reply, frame, refusal);
    });

    registerAssets(app);
    signInRoutes(app, deps);
    inboxRoutes(app, deps);
    dataRoutes(app, { browser: deps.browser, approvals: deps.approvals, calls: deps.calls, history: historyPanel(deps.history) });
    historyRoutes(app, deps.history, deps.restoreOnce, deps.calls);
    activityRoutes(app, deps.history, deps.restoreOnce, deps.calls);
    if (deps.oauth) consentRoutes(app, deps.oauth, (workspace, member, points) => deps.calls.chargeMemberLookup(workspace, member, points));
    connectedAppsRoutes(app, deps.oauth);
  };
}
