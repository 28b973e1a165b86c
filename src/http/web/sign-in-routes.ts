import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { NOT_A_MEMBER_KEY, type MemberRegistry } from '../../registry/members.ts';
import { hashKey } from '../../registry/secret-key.ts';
import { codedFlash } from './error-page.ts';
import { html } from './html.ts';
import { layout } from './layout.ts';
import { safeNext } from './safe-next.ts';
import { SESSION_COOKIE, cookieOptions, sameOrigin } from './web-auth.ts';
import { formBody, rawText } from './web-form.ts';
import type { WebSessions } from '../../registry/web-sessions.ts';

// `next` is any text: safeNext decides where it may lead. A repeated `?next=` (an array) fails
// the schema and, as before, leads to the default destination.
const signInQuery = z.object({ next: z.string().optional(), 'signed-out': z.string().optional() });
const signInBody = formBody({ key: z.string({ error: 'paste your member key' }).trim().min(1, 'paste your member key'), next: z.string().optional() });

function signInPage(next: string, error?: string, notice?: string) {
  const flash = error ? codedFlash(error) : notice ? { kind: 'ok' as const, text: notice } : undefined;
  return layout(
    { title: 'Sign in', ...(flash ? { flash } : {}) },
    html`<section class="signin">
<h1>Sign in to agentdb</h1>
<p class="muted">Use your member key (<code>agentdb members add</code> prints it once). It stays on the server; the browser keeps only a session cookie.</p>
<form method="post" action="/sign-in">
  <input type="hidden" name="next" value="${next}">
  <label for="key">Member key</label>
  <input id="key" name="key" type="password" autocomplete="current-password" required autofocus>
  <button type="submit" class="primary">Sign in</button>
</form>
</section>`,
  );
}

/** `/sign-in` (form and POST) and `/sign-out`. */
export function signInRoutes(app: FastifyInstance, deps: { members: MemberRegistry; sessions: WebSessions }): void {
  const zod = app.withTypeProvider<ZodTypeProvider>();
  // `attachValidation` on both: a bad form or link is the sign-in page again, saying what was
  // wrong, not the API's JSON.
  zod.get('/sign-in', { config: { public: true }, schema: { querystring: signInQuery }, attachValidation: true }, async (request, reply) => {
    // A malformed query is a link nobody's page made: the form, with its default destination.
    const query = request.validationError ? {} : request.query;
    const next = safeNext(query.next);
    if (request.webMember) return reply.redirect(next, 303);
    // After Sign out the page said nothing, and looked like a session that had expired.
    const notice = query['signed-out'] !== undefined ? 'Signed out: the session is ended on the server too.' : undefined;
    return reply.type('text/html; charset=utf-8').send(signInPage(next, undefined, notice).value);
  });

  zod.post('/sign-in', { config: { public: true }, schema: { body: signInBody }, attachValidation: true }, async (request, reply) => {
    // Read from the input as sent when the schema refused it: the page drawn again keeps its destination.
    const next = safeNext(request.validationError ? rawText(request.body, 'next') : request.body.next);
    // No session yet, so no token: the Origin check and SameSite=Strict keep another site
    // from signing a browser in as someone else.
    if (!sameOrigin(request)) return reply.code(403).type('text/html; charset=utf-8').send(signInPage(next, 'This form must be sent from this site.').value);
    // No key, as no member: 401, the page saying what to send.
    if (request.validationError) return reply.code(401).type('text/html; charset=utf-8').send(signInPage(next, request.validationError.message).value);
    const { key } = request.body;
    const member = await deps.members.authenticate(key);
    if (!member) {
      return reply.code(401).type('text/html; charset=utf-8').send(signInPage(next, NOT_A_MEMBER_KEY).value);
    }
    await deps.sessions.destroy(request.cookies[SESSION_COOKIE]);
    const { id } = await deps.sessions.create({ keyHash: hashKey(key), workspace: member.workspace, name: member.name });
    reply.setCookie(SESSION_COOKIE, id, cookieOptions);
    return reply.redirect(next, 303);
  });

  app.post('/sign-out', async (request, reply) => {
    await deps.sessions.destroy(request.webSession?.id);
    reply.clearCookie(SESSION_COOKIE, cookieOptions);
    return reply.redirect('/sign-in?signed-out', 303);
  });
}
