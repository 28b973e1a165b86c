import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { chargeConsent, type ChargeMemberLookup } from '../../calls/activity-charge.ts';
import { GRANT_SCOPES, type GrantLevel, grantLevel, narrowerLevel, roleLevel } from '../../contracts/grant-scope.ts';
import { AgentDbError } from '../../errors.ts';
import type { Member } from '../../registry/members.ts';
import { type AuthorizationQuery, type AuthorizationRequest, checkAuthorization, redirectWith } from '../../oauth/authorization-request.ts';
import { type OAuthDeps, publicBase } from '../oauth/oauth-deps.ts';
import { OAUTH_PATHS } from '../oauth/oauth-routes.ts';
import { refusalHead } from '../error-reply.ts';
import { codedFlash, refusalFlash } from './error-page.ts';
import { html } from './html.ts';
import { layout } from './layout.ts';
import { rawText } from './web-form.ts';
import { memberOf, sessionOf } from './web-request.ts';

const FIELDS = ['response_type', 'client_id', 'redirect_uri', 'code_challenge', 'code_challenge_method', 'state', 'scope', 'resource'] as const;

/** The authorization request's fields from a query or a form, text only (a repeated one is refused). */
function fieldsOf(input: unknown): AuthorizationQuery {
  const q: AuthorizationQuery = {};
  for (const f of FIELDS) {
    const v = rawText(input, f);
    if (v !== undefined) q[f] = v;
  }
  return q;
}

/**
 * What each level lets a client do, in the words of the tools; each includes the ones before it.
 * A token acts as the member, and a member's calls are never parked for approval (gateFor in
 * policy/approval-rule.ts: only agents' are), so the page says writes and drops run at once:
 * it once said they wait for a person, and a person granting drop on that word got none.
 */
const LEVEL_TEXT: Record<GrantLevel, { label: string; detail: string }> = {
  read: {
    label: 'Read only',
    detail: 'read the workspace’s shared tables and, read only, its agents’ tables (DATA_DESCRIBE_SCHEMA, DATA_QUERY_SQL)',
  },
  write: { label: 'Read and write', detail: 'also write the shared tables (DATA_WRITE_SQL), at once: as you, no one is asked to approve' },
  drop: { label: 'Read, write and drop', detail: 'also drop shared tables (DATA_DROP_TABLE), as you are an admin, at once: no one is asked to approve' },
};

/**
 * The most the page offers: what the app asked for (its `scope`), never past the member's role;
 * the person may choose less.
 */
function offered(member: Member, r: AuthorizationRequest): GrantLevel {
  const role = roleLevel(member.role);
  return r.asked ? narrowerLevel(r.asked, role) : role;
}

/**
 * The page's Content-Security-Policy with the client's redirect target added to `form-action`:
 * browsers apply form-action to the redirect that follows a form post, and the consent form's
 * answer is that redirect, to the client's own origin (or app scheme).
 */
function allowFormTo(reply: FastifyReply, redirectUri: string): void {
  const csp = reply.getHeader('content-security-policy');
  if (typeof csp !== 'string') return;
  const url = new URL(redirectUri);
  const source = url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : url.protocol;
  reply.header('content-security-policy', csp.replace("form-action 'self'", `form-action 'self' ${source}`));
}

/** Where a redirect URI sends the browser, as a person reads it: its host, or an app's scheme. */
function hostOf(redirectUri: string): string {
  const target = new URL(redirectUri);
  return target.protocol === 'http:' || target.protocol === 'https:' ? target.host : target.protocol;
}

/** The error, to the person; `back` (the client's registered redirect URI with the error) is a link they may follow. */
function problemPage(reply: FastifyReply, request: FastifyRequest, text: string, back?: string): FastifyReply {
  const page = layout(
    { title: 'Cannot connect the app', member: memberOf(request), csrf: sessionOf(request).csrf, flash: codedFlash(text) },
    html`${back ? html`<p><a href="${back}" rel="noreferrer">Tell the app (go to ${hostOf(back)})</a></p>` : ''}<p><a href="/apps">Connected apps</a></p>`,
  );
  return reply.code(400).type('text/html; charset=utf-8').send(page.value);
}

/**
 * A consent refused by the member's or workspace's rate (`RATE_LIMITED`, 429 with Retry-After):
 * the app still waits at its redirect, so the way on is this same consent page again once the
 * wait is over, not the generic error page's "← all databases" it was sent to (session 35, N11).
 */
function limitedPage(reply: FastifyReply, request: FastifyRequest, err: AgentDbError, q: AuthorizationQuery): FastifyReply {
  refusalHead(reply, err);
  const again = `${OAUTH_PATHS.authorize}?${new URLSearchParams(q as Record<string, string>).toString()}`;
  const page = layout(
    { title: 'Cannot connect the app yet', member: memberOf(request), csrf: sessionOf(request).csrf, flash: refusalFlash(err.code, err.detail) },
    html`<p><a href="${again}">Back to the consent page</a>, to allow it again once the wait is over (the app is still waiting).</p><p><a href="/apps">Connected apps</a></p>`,
  );
  return reply.type('text/html; charset=utf-8').send(page.value);
}

function consentPage(member: Member, csrf: string, r: AuthorizationRequest, q: AuthorizationQuery) {
  const where = hostOf(r.redirectUri);
  // Preselected: all the app asked for that the role allows; the person may narrow it.
  const top = offered(member, r);
  const levels = GRANT_SCOPES.slice(0, GRANT_SCOPES.indexOf(top) + 1);
  // The name is whatever the app (or its document's host) said: anyone may call theirs "Claude".
  return layout(
    { title: `Connect ${r.client.clientName} (unverified name)`, member, csrf },
    html`<section class="signin consent">
<h1>Connect ${r.client.clientName} to agentdb?</h1>
<p class="unverified"><strong>${r.client.clientName}</strong> is the name the app gives itself${r.client.documentHost ? html` in a document on ${r.client.documentHost}` : ''}; agentdb has not verified it. Its answer goes to <strong>${where}</strong>: allow only if you started this from an app you trust that uses that address.</p>
${r.client.documentHost ? html`<p class="muted">This app is described by ${r.client.documentHost} (its client id is <code>${r.client.clientId}</code>).</p>` : ''}
<p><strong>${r.client.clientName}</strong> asks to use agentdb’s tools as you, <strong>${member.name}</strong>${member.role === 'admin' ? ' (admin)' : ''}, in workspace <strong>${member.workspace}</strong>, at <code>${r.resource}</code>.</p>
<form method="post" action="${OAUTH_PATHS.authorize}">
  <input type="hidden" name="_csrf" value="${csrf}">
  ${FIELDS.map((f) => (q[f] !== undefined ? html`<input type="hidden" name="${f}" value="${q[f]}">` : ''))}
  <fieldset class="grant-level">
  <legend>It may:</legend>
  ${levels.map(
    (l) =>
      html`<label><input type="radio" name="access" value="${l}"${l === top ? ' checked' : ''}> <span><strong>${LEVEL_TEXT[l].label}</strong>: ${LEVEL_TEXT[l].detail}</span></label>`,
  )}
  </fieldset>
  <p class="muted">You can disconnect it at any time under Connected apps. Allowing sends you back to ${where}.</p>
  <div class="decide">
    <button type="submit" name="decision" value="allow" class="primary">Allow</button>
    <button type="submit" name="decision" value="deny">Deny</button>
  </div>
</form>
</section>`,
  );
}

/**
 * The OAuth consent on the web page: `GET /oauth/authorize` (signed out, the sign-in form first,
 * which comes back here) shows which app asks for which workspace and what it may do; the form's
 * POST (the page's Origin and CSRF checks apply) sends the browser back to the app with a code,
 * or with `access_denied`.
 */
export function consentRoutes(app: FastifyInstance, oauth: OAuthDeps, charge?: ChargeMemberLookup): void {
  const check = (request: FastifyRequest, q: AuthorizationQuery) => {
    const base = publicBase(request, oauth);
    const member = memberOf(request);
    return checkAuthorization(oauth.clients, q, { base, workspace: member.workspace }, request.ip);
  };
  const answerUrl = (request: FastifyRequest, redirectUri: string, params: Record<string, string | undefined>) =>
    redirectWith(redirectUri, { ...params, iss: publicBase(request, oauth) });
  const answer = (reply: FastifyReply, request: FastifyRequest, redirectUri: string, params: Record<string, string | undefined>) =>
    reply.redirect(answerUrl(request, redirectUri, params), 303);
  /** A refused request: redirected at once only for a vouched redirect URI, else shown with a link back. */
  const refuse = (
    reply: FastifyReply,
    request: FastifyRequest,
    r: { redirectUri: string; error: string; description: string; state?: string; atOnce: boolean },
  ) => {
    const params = { error: r.error, error_description: r.description, state: r.state };
    if (r.atOnce) return answer(reply, request, r.redirectUri, params);
    return problemPage(reply, request, `${r.error}: ${r.description}`, answerUrl(request, r.redirectUri, params));
  };

  app.get(OAUTH_PATHS.authorize, async (request, reply) => {
    const q = fieldsOf(request.query);
    // Counted as a lookup before the app's record is read or its document fetched (the core's rule).
    try {
      await chargeConsent(charge, memberOf(request), true);
    } catch (err) {
      if (err instanceof AgentDbError && err.code === 'RATE_LIMITED') return limitedPage(reply, request, err, q);
      throw err;
    }
    const checked = await check(request, q);
    if (!checked.ok && 'show' in checked) return problemPage(reply, request, checked.show);
    if (!checked.ok) return refuse(reply, request, checked.redirect);
    allowFormTo(reply, checked.request.redirectUri);
    return reply.type('text/html; charset=utf-8').send(consentPage(memberOf(request), sessionOf(request).csrf, checked.request, q).value);
  });

  app.post(OAUTH_PATHS.authorize, async (request, reply) => {
    const q = fieldsOf(request.body);
    const checked = await check(request, q);
    if (!checked.ok && 'show' in checked) return problemPage(reply, request, checked.show);
    if (!checked.ok) return refuse(reply, request, checked.redirect);
    const r = checked.request;
    if (rawText(request.body, 'decision') !== 'allow') {
      return answer(reply, request, r.redirectUri, { error: 'access_denied', error_description: 'The person denied access.', state: r.state });
    }
    // Only a level the page offered: never past the role, nor past what the app asked for.
    const member = memberOf(request);
    const chosen = grantLevel.safeParse(rawText(request.body, 'access'));
    const top = offered(member, r);
    if (!chosen.success || narrowerLevel(chosen.data, top) !== chosen.data) {
      return problemPage(reply, request, `invalid_scope: choose what the app may do, up to ${LEVEL_TEXT[top].label.toLowerCase()}.`);
    }
    // Counted as a call (the core's rule): past the rates, 429 and a way back to this page.
    try {
      await chargeConsent(charge, member);
    } catch (err) {
      if (err instanceof AgentDbError && err.code === 'RATE_LIMITED') return limitedPage(reply, request, err, q);
      throw err;
    }
    const code = await oauth.grants.consent(member, r.client, {
      redirectUri: r.redirectUri,
      redirectUriGiven: r.redirectUriGiven,
      challenge: r.challenge,
      resource: r.resource,
      level: chosen.data,
    });
    await oauth.clients.consented(r.client.clientId);
    return answer(reply, request, r.redirectUri, { code, state: r.state });
  });
}
