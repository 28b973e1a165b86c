import type { FastifyReply } from 'fastify';
import { ERRORS, errorBody, type ErrorCode } from '../errors.ts';

/**
 * Answers with the registry's status for `code` and the body every agentdb error has over
 * HTTP, `{ error: { code, message, hint } }`, so a client matches on the code whatever the route.
 * @param status overrides the registry's status (Fastify's own 4xx, e.g. 415, keep theirs).
 */
export function sendError(reply: FastifyReply, code: ErrorCode, detail?: string, status?: number): FastifyReply {
  return reply.code(status ?? ERRORS[code].status).send({ error: errorBody(code, detail) });
}
