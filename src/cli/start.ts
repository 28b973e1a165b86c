import type { ChildProcess } from 'node:child_process';
import { ApprovalService } from '../approvals/approval-service.ts';
import { MemberRegistry } from '../registry/members.ts';
import { createLogger } from '../logger.ts';
import { buildApp } from '../http/app.ts';
import { mcpOriginPolicy } from '../http/mcp-origin-check.ts';
import { Metrics } from '../metrics.ts';
import { addServiceGauges } from '../shards/service-gauges.ts';
import { BackupLog } from '../shards/backup-log.ts';
import { createWebDeps } from '../http/web/web-deps.ts';
import { createOAuthDeps } from '../http/oauth/oauth-deps.ts';
import { openBlobStore } from '../blobs/blob-stores.ts';
import { OffloadedResults } from '../blobs/offloaded-results.ts';
import { clientOf } from './client-of.ts';
import { KeyedCalls } from '../calls/bearer-key-calls.ts';
import { AgentRegistry } from '../registry/agents.ts';
import { KeyAuthenticator } from '../registry/principal.ts';
import { PrincipalCache } from '../registry/principal-cache.ts';
import { connectRedis } from '../redis/connection.ts';
import { logRedisState } from '../redis/redis-state-log.ts';
import { keysFor } from '../redis/keys.ts';
import { Scheduler } from '../schedule/scheduler.ts';
import { HistoryClient } from '../shards/history-client.ts';
import { ShardOpClient } from '../shards/shard-op-client.ts';
import { ShardWorkerPool } from '../shards/shard-worker-pool.ts';
import { shardsWithoutLease } from '../shards/unowned-shards.ts';
import { EXIT, type CommandContext } from './context.ts';
import { exitFor } from './exit-status.ts';
import { ensureRedis, watchLocalRedis } from './local-redis.ts';
import { interruption } from './signals.ts';
import { drainWithin, exitAfterGrace } from './drain.ts';
import { allShards } from './worker.ts';
import { mcpWaiting } from '../mcp/waiting-calls.ts';

/**
 * `agentdb start`: the HTTP endpoint, every shard worker and the scheduler in one process (`npm
 * start`); with `--http-only` (or START_WORKERS=off) the endpoint and the scheduler only, the
 * shards owned by `agentdb worker` processes beside it.
 */
export async function start(ctx: CommandContext, flags: { httpOnly?: boolean } = {}): Promise<number> {
  const { config } = ctx;
  // HTTP only: to scale HTTP and workers apart. Not for speed: on two loaded cores each call then
  // woke both processes, and /mcp was slower than in one (docs/benchmarks.md, session 38, M5).
  const withWorkers = config.startWorkers && flags.httpOnly !== true;
  const logger = createLogger(config.logLevel, 'agentdb');
  // Listening from the first moment, not from "ready": a SIGTERM during start-up (a supervisor's
  // stop, a deploy) met the default action, which ended the process and left the redis-server it
  // had started running (session 36, F15). Each step now goes on to its end, and the process
  // then stops what it started, as after "ready".
  const interrupt = interruption();
  const abort = new AbortController();
  let signalled: NodeJS.Signals | undefined;
  void interrupt.signal.then((s) => {
    signalled = s;
    abort.abort();
  });
  let redisServer: ChildProcess | undefined;
  try {
    redisServer = await ensureRedis(config.redisUrl, config.dataDir, abort.signal);
  } catch (err) {
    if (signalled) {
      logger.info({ signal: signalled }, 'stopping');
      return EXIT.ok;
    }
    ctx.stderr.write(`agentdb start: ${(err as Error).message}\n`);
    // No Redis, and none could be started: unavailable, as `agentdb worker` answers a Redis that does not answer.
    return exitFor('UNAVAILABLE');
  }
  // Set when this process stops the redis-server it started: its exit is then no news.
  let stoppingRedis = false;
  const stopRedis = () => {
    stoppingRedis = true;
    redisServer?.kill();
  };
  if (signalled) {
    logger.info({ signal: signalled }, 'stopping');
    stopRedis();
    return EXIT.ok;
  }
  // `pid` is pino's own field (this process); the server's needs a name of its own.
  if (redisServer) {
    logger.info({ redisPid: redisServer.pid }, 'started a local redis-server');
    watchLocalRedis(redisServer, config.redisUrl, config.dataDir, logger, () => stoppingRedis);
  }
  const redis = connectRedis(config.redisUrl, { name: 'agentdb-http' });
  // One log line when Redis goes away and one when it is back, for the whole process.
  logRedisState(redis, config.redisUrl, logger);
  // Set once stopping begins: GET /ready answers 503 from then on.
  let draining = false;
  const members = new MemberRegistry(redis, keysFor(config.prefix));
  const approvals = new ApprovalService({ redis, prefix: config.prefix, shardCount: config.shardCount, members });
  let pool: ShardWorkerPool | undefined;
  // Calls made with bearer keys go onto the queue the way a runtime's do.
  const blobs = openBlobStore(config);
  // One registry for the process: the client and the workers below count into it, /metrics reads it.
  const metrics = new Metrics();
  const client = clientOf(config, metrics);
  const historyOps = new ShardOpClient({ redisUrl: config.redisUrl, prefix: config.prefix });
  const calls = new KeyedCalls(client);
  const history = new HistoryClient(historyOps, config.shardCount, new AgentRegistry(redis, keysFor(config.prefix)));
  // The web page's history panel calls the same history core as /v1/databases/:db/history.
  const web = createWebDeps(config, { redis, members, approvals, calls, history });
  const keys = keysFor(config.prefix);
  const principals = new PrincipalCache(connectRedis(config.redisUrl, { name: 'agentdb-registry-changes' }), keys.registryChanges, config.keyCacheTtlMs);
  // Not awaited: until it has subscribed the cache is simply unused.
  void principals.start();
  // OAuth sign-in for people's MCP clients, consenting on the web page (OAUTH=off: keys only).
  const oauth = createOAuthDeps(config, { redis, members }, { principals });
  const closeGauges = addServiceGauges(metrics, { redis, keys, config, backups: new BackupLog(redis, keys) });
  const app = buildApp({
    redis,
    shardCount: config.shardCount,
    ownedShards: () => pool?.ownedShards() ?? [],
    readiness: {
      // HTTP only, ready once every shard has an owner elsewhere: calls to one without would wait.
      shardsWithoutOwner: withWorkers
        ? () => pool?.shardsWithoutOwner() ?? Promise.resolve(allShards(config.shardCount))
        : () => shardsWithoutLease(redis, keys, allShards(config.shardCount)),
      draining: () => draining,
    },
    members,
    approvals,
    logger,
    history,
    restoreOnce: web.web.restoreOnce,
    keyed: {
      auth: new KeyAuthenticator(redis, keys, principals),
      calls,
      waitMs: config.httpWaitMs,
      approvalWaitMs: config.mcpApprovalWaitMs,
      mcpOrigins: mcpOriginPolicy(config),
      mcpWaiting: mcpWaiting({ redis, keys, calls, approvalTtlMs: config.approvalTtlMs, resultTtlS: config.resultTtlS }),
      results: new OffloadedResults(blobs, { dataDir: config.dataDir, ttlS: config.resultTtlS, stallMs: config.downloadStallMs }),
    },
    web: web.web,
    ...(oauth ? { oauth } : {}),
    trustProxy: config.trustProxy,
    connections: config.httpConnections,
    metrics: { metrics, ...(config.metricsToken ? { token: config.metricsToken } : {}) },
  });
  // What this process opened besides the server and the workers, closed the same way whichever
  // way it stops: after what uses them has stopped, and the connection they share last.
  const closeClients = async () => {
    await closeGauges();
    await web.close();
    await approvals.close();
    await client.close();
    await historyOps.close();
    await blobs.close();
    principals.close();
    redis.disconnect();
  };
  // The port first: a second `agentdb start` must stop before it starts workers of its own.
  let address: string;
  try {
    address = await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    await app.close();
    await closeClients();
    stopRedis();
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EADDRINUSE' && code !== 'EACCES') throw err;
    const why = code === 'EADDRINUSE' ? 'is taken (another agentdb start, or another server, listens there)' : 'may not be opened by this user';
    ctx.stderr.write(`agentdb start: port ${config.port} on ${config.host} ${why}. Stop that server, or set PORT to a free port.\n`);
    return EXIT.usage;
  }
  // A step under way when the signal came finishes; none starts after it.
  let scheduler: Scheduler | undefined;
  if (!signalled && withWorkers) {
    pool = new ShardWorkerPool({ config, shards: allShards(config.shardCount), logger, metrics });
    await pool.start();
  }
  if (!signalled) {
    scheduler = new Scheduler(config, logger);
    await scheduler.start();
  }
  if (!signalled) logger.info({ address, shards: pool?.ownedShards().length ?? 0, ...(withWorkers ? {} : { httpOnly: true }) }, 'agentdb ready');
  logger.info({ signal: await interrupt.signal }, 'stopping');
  draining = true;
  const drained = await drainWithin(config.drainGraceMs, logger, async () => {
    // Intake stops first and all at once: no new request, scheduled job or shard job is taken
    // while anything else closes (one part waiting for Redis must not leave the others running).
    // Requests still waiting answer where their call stands, so the server can close.
    calls.stopWaiting();
    await Promise.all([app.close(), scheduler?.stop(), pool?.stop()]);
    await closeClients();
  });
  stopRedis();
  if (!drained) exitAfterGrace(logger, config.drainGraceMs, EXIT.failed);
  return EXIT.ok;
}
