import type { FastifyRequest } from 'fastify';
import type { Member } from '../../registry/members.ts';
import { checkMemberDatabase } from '../../policy/member-databases.ts';
import type { WebSession } from '../../registry/web-sessions.ts';

/** The signed-in member of a web route (every route but the public ones requires one). */
export function memberOf(request: FastifyRequest): Member {
  if (!request.webMember) throw new Error('memberOf() on a web route without a signed-in member');
  return request.webMember;
}

/** The session of a web route, for its CSRF token. */
export function sessionOf(request: FastifyRequest): WebSession & { id: string } {
  if (!request.webSession) throw new Error('sessionOf() on a web route without a session');
  return request.webSession;
}

/** The database a request names (text, by its route's schema), if it is one of the member's workspace. */
export function ownDatabase(member: Member, db: string): string {
  return checkMemberDatabase({ workspace: member.workspace, member: member.name }, db);
}
