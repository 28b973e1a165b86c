import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { sendError } from './error-reply.ts';
import { metricsRoute } from './metrics-route.ts';

/** Where a process without the HTTP API serves `GET /metrics`, and to whom. */
export interface MetricsServerOptions {
  metrics: Metrics;
  /** METRICS_TOKEN; absent, `/metrics` answers NOT_FOUND saying how to turn it on. */
  token?: string;
  host: string;
  port: number;
  logger: Logger;
}

/**
 * `GET /metrics` alone, on a port of its own (WORKER_METRICS_PORT): what an `agentdb worker`
 * serves, so that its own counters and gauges (calls its workers finished, executor children,
 * capture lag) are scraped too; `agentdb start` serves the same route beside its API on PORT.
 * Any other path answers NOT_FOUND. @returns the server, listening, and the address it took.
 */
export async function serveMetrics(opts: MetricsServerOptions): Promise<{ app: FastifyInstance; address: string }> {
  const app = Fastify({ loggerInstance: opts.logger as FastifyBaseLogger, disableRequestLogging: true });
  await app.register(metricsRoute({ metrics: opts.metrics, ...(opts.token ? { token: opts.token } : {}) }));
  app.setNotFoundHandler((request, reply) => sendError(reply, 'NOT_FOUND', `No route ${request.method} ${request.url}: this port serves GET /metrics only.`));
  const address = await app.listen({ host: opts.host, port: opts.port });
  return { app, address };
}
