import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { scopeOfLevel } from '../../contracts/grant-scope.ts';
import type { OAuthGrant } from '../../oauth/oauth-grant-records.ts';
import type { OAuthDeps } from '../oauth/oauth-deps.ts';
import { html } from './html.ts';
import { ago, isoTime, layout } from './layout.ts';
import { memberOf, sessionOf } from './web-request.ts';

const idParams = z.object({ id: z.string().min(1).max(64) });
const appsQuery = z.object({ revoked: z.string().optional().catch(undefined) });

function grantRow(g: OAuthGrant, csrf: string) {
  return html`<tr data-grant="${g.id}">
<td>${g.clientName}</td>
<td><code>${g.resource}</code></td>
<td class="grant-scope">${g.level ? scopeOfLevel(g.level) : 'as your role'}</td>
<td title="${isoTime(g.createdAt)}">${ago(g.createdAt)}</td>
${
  // Listed before its code is exchanged (that code may still be, so it can be disconnected), but
  // no token has been issued: refreshedAt is only when the person clicked Allow.
  g.accessHash ? html`<td class="last-token" title="${isoTime(g.refreshedAt)}">${ago(g.refreshedAt)}</td>` : html`<td class="last-token">never</td>`
}
<td><form method="post" action="/apps/${g.id}/revoke"><input type="hidden" name="_csrf" value="${csrf}"><button type="submit" class="danger">Disconnect</button></form></td>
</tr>`;
}

/**
 * "Connected apps": the signed-in member's OAuth grants (`GET /apps`), each revocable at once
 * (`POST /apps/<id>/revoke`: its access and refresh tokens stop working at their next use).
 * Without OAuth on this server, the page says so.
 */
export function connectedAppsRoutes(app: FastifyInstance, oauth: OAuthDeps | undefined): void {
  const zod = app.withTypeProvider<ZodTypeProvider>();
  zod.get('/apps', { schema: { querystring: appsQuery } }, async (request, reply) => {
    const member = memberOf(request);
    const { csrf } = sessionOf(request);
    const grants = oauth ? await oauth.grants.list(member.workspace, member.name) : [];
    const flash = request.query.revoked !== undefined ? ({ kind: 'ok', text: 'Disconnected: the app’s tokens no longer work.' } as const) : undefined;
    const body = !oauth
      ? html`<p class="empty">OAuth sign-in is not on for this server: apps connect with a member key.</p>`
      : grants.length === 0
        ? html`<p class="empty">No app is connected as you. An MCP client (Claude, ChatGPT, Cursor) connects when you add this server’s <code>/mcp</code> URL to it and allow it here.</p>`
        : html`<div class="scroll"><table class="list">
<thead><tr><th>App</th><th>Endpoint</th><th>May</th><th>Connected</th><th>Last token</th><th></th></tr></thead>
<tbody>${grants.map((g) => grantRow(g, csrf))}</tbody>
</table></div>`;
    const page = layout(
      { title: 'Connected apps', member, csrf, ...(flash ? { flash } : {}) },
      html`<h1>Connected apps</h1>
<p class="muted">Apps that signed in as you with OAuth; each acts as you in ${member.workspace}, within your role, as far as you allowed it (read; read and write; or, for admins, also drop).</p>
${body}`,
    );
    return reply.type('text/html; charset=utf-8').send(page.value);
  });

  zod.post('/apps/:id/revoke', { schema: { params: idParams } }, async (request, reply) => {
    const member = memberOf(request);
    // Another member's grant, or one already gone, is the same: nothing of it is left here.
    if (oauth) await oauth.grants.revoke(member.workspace, member.name, request.params.id);
    return reply.redirect('/apps?revoked', 303);
  });
}
