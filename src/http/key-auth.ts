import type { FastifyReply, FastifyRequest } from 'fastify';
import { AgentDbError } from '../errors.ts';
import type { KeyAuthenticator, Principal } from '../registry/principal.ts';
import { sendError } from './error-reply.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who the bearer key speaks for; set by {@link requireKey}. */
    principal?: Principal;
    /** Why the key could not be looked up (Redis away); set by {@link requireKeyOrOutage}. */
    keyOutage?: string;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * The bearer token of a request, or why there is none. The reasons say only what is wrong with
 * the header, never whether a key exists: a missing, malformed, unknown or revoked key all read
 * alike past this point.
 */
export function bearerOf(header: string | undefined): string | undefined {
  return header ? BEARER.exec(header)?.[1] : undefined;
}

/**
 * An `onRequest` hook that lets a request through only with an active agent or member key as a
 * bearer token, recording its principal. It runs before the body is read. The answer to any
 * bad key is one and the same, so it tells nobody which keys exist.
 */
export function requireKey(auth: KeyAuthenticator) {
  return async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const token = bearerOf(request.headers.authorization);
    const principal = token ? await auth.authenticate(token) : undefined;
    if (!principal) {
      reply.header('www-authenticate', 'Bearer realm="agentdb"');
      return sendError(reply, 'UNAUTHENTICATED', 'Send Authorization: Bearer <an active agent or member key>.');
    }
    request.principal = principal;
    return undefined;
  };
}

/**
 * As {@link requireKey}, but a key that cannot be looked up because Redis is away is left to the
 * route (`request.keyOutage`): `/v1/calls` answers it as the call's own envelope, with
 * `mayStillRun`, where a bare `{ error }` left a client that resent under its own id no way to
 * tell whether an earlier send may have run.
 */
export function requireKeyOrOutage(auth: KeyAuthenticator) {
  const check = requireKey(auth);
  return async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    try {
      return await check(request, reply);
    } catch (err) {
      if (!(err instanceof AgentDbError) || err.code !== 'UNAVAILABLE') throw err;
      request.keyOutage = err.detail ?? err.message;
      return undefined;
    }
  };
}

/** The principal of a request that passed {@link requireKey}. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error('principalOf() on a route without requireKey');
  return request.principal;
}
