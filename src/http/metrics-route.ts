import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../metrics.ts';
import { sendError } from './error-reply.ts';

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * `GET /metrics`: the Prometheus text of `metrics`, for a bearer of the operators' token
 * (METRICS_TOKEN). Not open like `/health` and `/ready`: it names workspaces and shows every
 * tenant's load, and the port is meant to face the network behind a proxy; member keys do not
 * fit either, each being one workspace's. Without a token set the route says how to turn it on.
 */
export function metricsRoute(deps: { metrics: Metrics; token?: string }) {
  const want = deps.token === undefined ? undefined : digest(deps.token);
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/metrics', async (request, reply) => {
      if (!want) return sendError(reply, 'NOT_FOUND', '/metrics is off: set METRICS_TOKEN (16 characters or more) and scrape with it as a bearer token.');
      const token = BEARER.exec(request.headers.authorization ?? '')?.[1];
      // Compared as digests, in constant time: the token's length is not told by the timing either.
      if (!token || !timingSafeEqual(digest(token), want)) {
        reply.header('www-authenticate', 'Bearer realm="agentdb-metrics"');
        return sendError(reply, 'UNAUTHENTICATED', '/metrics takes the operators\' METRICS_TOKEN as "Authorization: Bearer <token>".');
      }
      return reply.header('content-type', deps.metrics.contentType).send(await deps.metrics.text());
    });
  };
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}
