import type { FastifyReply } from 'fastify';
import { ERRORS, errorBody, type ErrorCode } from '../errors.ts';

/**
 * Answers with the registry's status for `code` and the body every agentdb error has over
 * HTTP, `{ error: { code, message, hint } }`, so a client matches on the code whatever the route.
 * @param status overrides the registry's status (Fastify's own 4xx, e.g. 415, keep theirs).
 * @param hints replace the registry's hint for these codes (see `HISTORY_HINTS`).
 */
export function sendError(reply: FastifyReply, code: ErrorCode, detail?: string, status?: number, hints?: Partial<Record<ErrorCode, string>>): FastifyReply {
  const answer = status ?? ERRORS[code].status;
  // The caller's mistakes log at info; server faults are logged by whoever caught them, with the
  // error. Only the code and route: never headers (keys) or bodies (SQL, params).
  if (answer < 500) reply.log.info({ code, status: answer, route: reply.request.routeOptions.url }, 'request refused');
  return reply.code(answer).send({ error: errorBody(code, detail, hints) });
}
