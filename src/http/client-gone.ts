import type { FastifyReply } from 'fastify';

/**
 * A signal that aborts when the request's client goes away before its answer was written (a
 * closed connection, a timed-out fetch): a call's wait given it stops at once, instead of
 * listening for the call's end on behalf of nobody. A client gone already (while its key was
 * looked up or its body read, awaits before this) aborts it at once: the response's 'close' is
 * emitted once, and a listener added after it waited out the whole HTTP wait limit.
 */
export function clientGone(reply: FastifyReply): AbortSignal {
  const gone = new AbortController();
  const left = () => {
    if (!reply.raw.writableFinished) gone.abort(new Error('the client went away before its answer'));
  };
  if (reply.raw.destroyed) left();
  else reply.raw.once('close', left);
  return gone.signal;
}
