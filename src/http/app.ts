import Fastify, { type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';

/** What the HTTP app reads; the processes it reports on are passed in, never created here. */
export interface AppDeps {
  redis: Redis;
  /** The shards this process's workers own, when it runs any. */
  ownedShards?: () => number[];
  shardCount: number;
}

/**
 * Builds the Fastify app without listening, so tests can `inject()` requests.
 * `GET /health` answers 200 when Redis answers, 503 otherwise.
 */
export function buildApp(deps: AppDeps): FastifyInstance {
  const app = Fastify({ logger: false });
  app.get('/health', async (_req, reply) => {
    let redis: 'up' | 'down' = 'up';
    try {
      await deps.redis.ping();
    } catch {
      redis = 'down';
    }
    const body = { ok: redis === 'up', redis, shardCount: deps.shardCount, ownedShards: deps.ownedShards?.() ?? [] };
    return reply.code(body.ok ? 200 : 503).send(body);
  });
  return app;
}
