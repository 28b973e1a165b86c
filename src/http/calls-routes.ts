import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { callId } from '../contracts/call.ts';
import type { CallAnswer } from '../calls/client.ts';
import { unsentUnavailable } from '../calls/outage-answers.ts';
import type { KeyedCalls, TraceContext } from '../calls/bearer-key-calls.ts';
import type { KeyAuthenticator } from '../registry/principal.ts';
import { clientGone } from './client-gone.ts';
import { refusalHead } from './error-reply.ts';
import { principalOf, requireKeyOrOutage } from './key-auth.ts';

/** What the calls routes need: key resolution, the keyed-call core and the wait bound. */
export interface CallsRoutesDeps {
  auth: KeyAuthenticator;
  calls: KeyedCalls;
  /** The longest one request waits before answering where its call stands. */
  waitMs: number;
}

const callBody = z.strictObject({
  tool: z.string().min(1).max(64),
  arguments: z.record(z.string(), z.unknown()).optional(),
  callId: callId.optional(),
});
// Each route's schemas are compiled once, when the route is added (route-validation.ts).
const waitQuery = (fallback: boolean) =>
  z.strictObject({
    wait: z
      .enum(['true', 'false'])
      .optional()
      .transform((w) => (w === undefined ? fallback : w === 'true')),
  });
const idParams = z.object({ id: z.string().min(1).max(128) });

/**
 * Tool calls over HTTP with an agent or member key:
 * - `POST /v1/calls` `{ tool, arguments, callId? }` → the call's envelope (200), or, when it is
 *   not finished (`?wait=false` answers at once; by default it waits up to the bound), where it
 *   stands: `queued`, `running` or `awaiting_approval` (202).
 * - `GET /v1/calls/:id` → the key's own call (`?wait=true` long-polls up to the bound); another
 *   caller's call id answers NOT_FOUND like an unknown one.
 * Tool refusals are envelopes (`ok: false`, 200): only the request itself failing is an HTTP error:
 * a call id already used for another call (IDEMPOTENCY_CONFLICT, 409), a rate limit reached
 * (RATE_LIMITED, 429 with Retry-After), the workspace's Redis budget used up (QUOTA_EXCEEDED with
 * `retryAfter`, 429 with Retry-After; without it, when nothing kept expires first, 403), or Redis
 * gone (UNAVAILABLE, 503), each with the envelope.
 */
export function callsRoutes(deps: CallsRoutesDeps): FastifyPluginAsyncZod {
  return async (app) => {
    app.addHook('onRequest', requireKeyOrOutage(deps.auth));

    // A key whose rate is known spent is refused from its headers, before its body is read and
    // parsed: a flood past the rate costs the server no parse (T17).
    const knownOverRate = async (request: FastifyRequest, reply: FastifyReply) => {
      const refused = request.principal && deps.calls.refusedByKnownRate(request.principal);
      return refused ? answerWith(reply, refused, deps.calls) : undefined;
    };

    app.post('/v1/calls', { onRequest: knownOverRate, schema: { body: callBody, querystring: waitQuery(true) } }, async (request, reply) => {
      if (request.keyOutage !== undefined) return answerWith(reply, unsentUnavailable(request.body.callId, request.body.tool, request.keyOutage), deps.calls);
      const signal = clientGone(reply);
      const answer = await untilGone(
        signal,
        deps.calls.call(principalOf(request), request.body, { wait: request.query.wait, maxWaitMs: deps.waitMs, signal, trace: traceOf(request.headers) }),
      );
      return answer ? answerWith(reply, answer, deps.calls) : gone(reply);
    });

    app.get('/v1/calls/:id', { schema: { params: idParams, querystring: waitQuery(false) } }, async (request, reply) => {
      if (request.keyOutage !== undefined) return answerWith(reply, unsentUnavailable(request.params.id, '', request.keyOutage), deps.calls);
      const signal = clientGone(reply);
      const answer = await untilGone(
        signal,
        deps.calls.result(principalOf(request), request.params.id, { wait: request.query.wait, maxWaitMs: deps.waitMs, signal }),
      );
      return answer ? answerWith(reply, answer, deps.calls) : gone(reply);
    });
  };
}

/** Ends a request whose client went away (nginx's 499, "client closed request"): written to nobody. */
function gone(reply: FastifyReply): FastifyReply {
  return reply.code(499).send();
}

/** The answer, or undefined when the client went away first: nobody is left to answer. */
async function untilGone<T>(signal: AbortSignal, answer: Promise<T>): Promise<T | undefined> {
  try {
    return await answer;
  } catch (err) {
    if (signal.aborted) return undefined;
    throw err;
  }
}

function answerWith(reply: FastifyReply, answer: CallAnswer, calls: KeyedCalls): FastifyReply {
  if ('status' in answer) return reply.code(202).send(answer);
  if (!answer.ok && answer.error.code === 'NOT_FOUND' && answer.tool === '') return reply.code(404).send(answer);
  // Not the tool refusing but the request failing (the core's rule, `KeyedCalls.refusesTheRequest`),
  // with the envelope as its body and the status `refusalHead` gives every route.
  if (!answer.ok && calls.refusesTheRequest(answer)) return refusalHead(reply, answer.error).send(answer);
  return reply.code(200).send(answer);
}

/** The caller's W3C trace context from its request headers (only the first of a repeated one). */
function traceOf(headers: Record<string, string | string[] | undefined>): TraceContext | undefined {
  const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
  const traceparent = one(headers.traceparent);
  if (!traceparent) return undefined;
  const tracestate = one(headers.tracestate);
  return { traceparent, ...(tracestate ? { tracestate } : {}) };
}
