import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Member, MemberRegistry } from '../../registry/members.ts';
import { rawText } from './web-form.ts';
import type { WebSession, WebSessions } from '../../registry/web-sessions.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in member of a web request, checked against the registry on this request. */
    webMember?: Member;
    webSession?: WebSession & { id: string };
  }
}

/** The session cookie: HttpOnly, SameSite=Strict, Path=/, no Max-Age (it ends with the browser). */
export const SESSION_COOKIE = 'agentdb_session';

export const cookieOptions = { httpOnly: true, sameSite: 'strict', path: '/', secure: 'auto' } as const;

/**
 * Finds the request's session and checks its member again: an unknown, lapsed or revoked
 * session leaves the request signed out (and a revoked member's session is ended).
 */
export async function loadMember(request: FastifyRequest, sessions: WebSessions, members: MemberRegistry): Promise<void> {
  const id = request.cookies[SESSION_COOKIE];
  const session = await sessions.get(id);
  if (!session) return;
  const member = await members.authenticateHash(session.keyHash);
  if (!member || member.workspace !== session.workspace || member.name !== session.name) {
    await sessions.destroy(id);
    return;
  }
  request.webMember = member;
  request.webSession = { ...session, id: id! };
}

/**
 * True when a state-changing request came from this site's own page (Origin matches Host).
 * `request.host` is the Host header, or X-Forwarded-Host from a proxy TRUST_PROXY believes.
 */
export function sameOrigin(request: FastifyRequest): boolean {
  const origin = request.headers.origin;
  const host = request.host;
  if (!origin || !host) return false;
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

/** True when `token` (form field `_csrf` or header `x-csrf-token`) is the session's own. */
export function csrfMatches(request: FastifyRequest): boolean {
  const expected = request.webSession?.csrf;
  const sent = rawText(request.body, '_csrf') ?? request.headers['x-csrf-token'];
  if (!expected || typeof sent !== 'string') return false;
  const a = Buffer.from(sent);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Where a signed-out browser goes: pages to the sign-in form, scripts get a 401. */
export function signedOut(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  reply.clearCookie(SESSION_COOKIE, cookieOptions);
  const wantsHtml = request.method === 'GET' && (request.headers.accept ?? '').includes('text/html');
  if (wantsHtml) return reply.redirect(`/sign-in?next=${encodeURIComponent(request.url)}`, 303);
  return reply
    .code(401)
    .type('application/json')
    .send({ error: { code: 'UNAUTHENTICATED', message: 'Sign in again.' } });
}
