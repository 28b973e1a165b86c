import type { FastifyReply, FastifyRequest } from 'fastify';
import { NOT_A_MEMBER_KEY, type Member, type MemberRegistry } from '../registry/members.ts';
import { sendError } from './error-reply.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The member whose bearer key the request carries; set by {@link requireMember}. */
    member?: Member;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * An `onRequest` hook that lets a request through only with an active member's key as a
 * bearer token, and records that member on `request.member`. It runs before the body is read,
 * so an unauthenticated caller learns nothing about what a valid body would be. The key is
 * never logged or echoed.
 */
export function requireMember(members: MemberRegistry) {
  // Returning the reply after sending tells Fastify to stop the chain there.
  return async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const header = request.headers.authorization;
    if (!header) return deny(reply, 'The Authorization header is missing.');
    const token = BEARER.exec(header)?.[1];
    if (!token) return deny(reply, 'The Authorization header must be "Bearer <key>".');
    const member = await members.authenticate(token);
    if (!member) return deny(reply, NOT_A_MEMBER_KEY);
    request.member = member;
    return undefined;
  };
}

/** The member of a request that passed {@link requireMember}. */
export function memberOf(request: FastifyRequest): Member {
  if (!request.member) throw new Error('memberOf() on a route without requireMember');
  return request.member;
}

function deny(reply: FastifyReply, detail: string): FastifyReply {
  // RFC 6750: a 401 names the scheme the client should use.
  reply.header('www-authenticate', 'Bearer realm="agentdb"');
  return sendError(reply, 'UNAUTHENTICATED', detail);
}
