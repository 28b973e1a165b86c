import type { FastifyReply } from 'fastify';

/**
 * A signal that aborts when the request's client goes away before its answer was written (a
 * closed connection, a timed-out fetch): a call's wait given it stops at once, instead of
 * listening for the call's end on behalf of nobody.
 */
export function clientGone(reply: FastifyReply): AbortSignal {
  const gone = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) gone.abort(new Error('the client went away before its answer'));
  });
  return gone.signal;
}
