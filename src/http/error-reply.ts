import type { FastifyReply } from 'fastify';
import { errorBody, httpStatusOf, type AgentDbError, type ErrorBody, type ErrorCode } from '../errors.ts';
import { rateSource, rateSource48 } from '../oauth/oauth-rate-source.ts';
import { RefusalLog } from './refusal-log.ts';

/**
 * Answers with the registry's status for `code` and the body every agentdb error has over
 * HTTP, `{ error: { code, message, hint } }`, so a client matches on the code whatever the route.
 * @param status overrides the registry's status (Fastify's own 4xx, e.g. 415, keep theirs).
 * @param hints replace the registry's hint for these codes (see `HISTORY_HINTS`).
 */
export function sendError(reply: FastifyReply, code: ErrorCode, detail?: string, status?: number, hints?: Partial<Record<ErrorCode, string>>): FastifyReply {
  return sent(reply, errorBody(code, detail, hints), status);
}

/** As {@link sendError}, for a refusal thrown by the core: its `retryAfter` too (a 429 with Retry-After). */
export function sendRefusal(reply: FastifyReply, err: AgentDbError, hints?: Partial<Record<ErrorCode, string>>): FastifyReply {
  const body = errorBody(err.code, err.detail, hints);
  return sent(reply, err.retryAfter !== undefined ? { ...body, retryAfter: err.retryAfter } : body);
}

/**
 * Sets the status and Retry-After of an answer refusing with `error` (an error body, an envelope's
 * error, an AgentDbError), by `httpStatusOf`: the one place a route's refusal gets its status, so
 * QUOTA_EXCEEDED by the Redis budget is a 429 that says when wherever it is answered, and by the
 * disk quota a 403 that no client sends again. A 429 always says when (RATE_LIMITED without its
 * seconds: 1).
 */
export function refusalHead(reply: FastifyReply, error: Pick<ErrorBody, 'code' | 'retryAfter'>, status?: number): FastifyReply {
  const answer = status ?? httpStatusOf(error);
  if (answer === 429) reply.header('retry-after', String(error.retryAfter ?? 1));
  return reply.code(answer);
}

function sent(reply: FastifyReply, body: ErrorBody, status?: number): FastifyReply {
  refusalHead(reply, body, status);
  // The caller's mistakes log at info; server faults are logged by whoever caught them, with the
  // error. Only the code and route: never headers (keys) or bodies (SQL, params). At most a few a
  // minute per address, the rest counted (refusal-log.ts).
  if (reply.statusCode < 500) logRefusal(reply, body.code);
  return reply.send({ error: body });
}

/** Each server's refusal lines per address (one per app: tests build several in a process). */
const refusalLogs = new WeakMap<object, RefusalLog>();

function logRefusal(reply: FastifyReply, code: string): void {
  let refusals = refusalLogs.get(reply.server);
  if (!refusals) refusalLogs.set(reply.server, (refusals = new RefusalLog()));
  const ip = reply.request.ip;
  const line = refusals.refused(rateSource(ip), rateSource48(ip));
  if (!line.log) return;
  const fields = { code, status: reply.statusCode, route: reply.request.routeOptions.url };
  reply.log.info(line.unlogged ? { ...fields, unloggedBefore: line.unlogged } : fields, 'request refused');
}
