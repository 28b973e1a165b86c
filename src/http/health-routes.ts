import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { pingWithin, TIMED_OUT, within } from '../redis/bounded-wait.ts';

/** What `/health` and `/ready` report on; the processes are passed in, never created here. */
export interface HealthDeps {
  redis: Redis;
  shardCount: number;
  /** The shards this process's workers own, when it runs any. */
  ownedShards?: () => number[];
  readiness?: ReadinessDeps;
}

/** What `/ready` asks beyond Redis. */
export interface ReadinessDeps {
  /**
   * Shards of this process's range that no worker owns yet (this process or another); absent
   * for a process that serves the API only and owns no shard.
   */
  shardsWithoutOwner?: () => Promise<number[]>;
  /** True once the process has begun to stop: it takes no new work. */
  draining?: () => boolean;
}

/**
 * How long either probe waits for Redis. Docker's health check gives up after 3 s and an
 * orchestrator's liveness probe after 1 s by default: both endpoints answer well inside that
 * whatever Redis does (it may be up and not answering: paused, swapping, stuck in a script).
 */
export const PROBE_MS = 400;

/** Why a process is not ready, as `/ready` names it. */
export type NotReadyReason = 'draining' | 'redis' | 'shards';

/**
 * `GET /health`: liveness. 200 whenever this process can answer at all, with whether Redis
 * answered within {@link PROBE_MS}; a Redis outage is not a reason to restart the process.
 * `GET /ready`: readiness for traffic. 200 only when Redis answers, every shard of this
 * process's range has an owner (or it owns none: API only), and it is not stopping; otherwise
 * 503 with the reason. Before, `/health` was both, said ok with no shard owned yet, and took
 * 7.6 s to answer with Redis down.
 */
export function healthRoutes(deps: HealthDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/health', async (_req, reply) => {
      const redis = (await pingWithin(deps.redis, PROBE_MS)) ? 'up' : 'down';
      return reply.code(200).send({ ok: true, redis, shardCount: deps.shardCount, ownedShards: deps.ownedShards?.() ?? [] });
    });

    app.get('/ready', async (_req, reply) => {
      const notReady = (reason: NotReadyReason, message: string, extra: Record<string, unknown> = {}) =>
        reply.code(503).send({ ready: false, reason, message, ...extra });
      const { readiness = {} } = deps;
      if (readiness.draining?.()) return notReady('draining', 'This process is stopping: it takes no new work.');
      if (!(await pingWithin(deps.redis, PROBE_MS))) return notReady('redis', `Redis did not answer within ${PROBE_MS} ms.`);
      if (readiness.draining?.()) return notReady('draining', 'This process is stopping: it takes no new work.');
      if (readiness.shardsWithoutOwner) {
        const missing = await within(
          PROBE_MS,
          readiness.shardsWithoutOwner().catch((): typeof TIMED_OUT => TIMED_OUT),
        );
        if (missing === TIMED_OUT) return notReady('redis', `Redis did not answer which shards have an owner within ${PROBE_MS} ms.`);
        if (missing.length > 0) {
          return notReady(
            'shards',
            `No worker owns shard${missing.length > 1 ? 's' : ''} ${missing.join(', ')} yet: calls to ${missing.length > 1 ? 'them' : 'it'} would wait.`,
            { shardsWithoutOwner: missing },
          );
        }
      }
      return reply.code(200).send({ ready: true, shardCount: deps.shardCount, ownedShards: deps.ownedShards?.() ?? [] });
    });
  };
}
