import { ApprovalService } from '../approvals/approval-service.ts';
import { MemberRegistry } from '../approvals/members.ts';
import { createLogger } from '../logger.ts';
import { buildApp } from '../http/app.ts';
import { AgentDbClient } from '../queue/client.ts';
import { KeyedCalls } from '../queue/keyed-calls.ts';
import { KeyAuthenticator } from '../registry/principal.ts';
import { connectRedis } from '../queue/connection.ts';
import { keysFor } from '../queue/keys.ts';
import { Scheduler } from '../queue/scheduler.ts';
import { ShardWorkerPool } from '../queue/shard-worker-pool.ts';
import { commandFlags } from './flags.ts';
import { ensureRedis } from './local-redis.ts';
import type { CommandContext } from './main.ts';
import { untilSignal } from './signals.ts';
import { allShards } from './worker.ts';

/** `agentdb start`: the HTTP endpoint, every shard worker and the scheduler in one process (`npm start`). */
export async function start(ctx: CommandContext): Promise<number> {
  const { config } = ctx;
  // It takes no flags; one that is not understood must not start a server as if it were.
  const parsed = commandFlags(ctx, 'start', { args: ctx.argv, options: {} });
  if (!parsed) return 2;
  const logger = createLogger(config.logLevel, 'agentdb');
  let redisServer;
  try {
    redisServer = await ensureRedis(config.redisUrl, config.dataDir);
  } catch (err) {
    ctx.stderr.write(`agentdb start: ${(err as Error).message}\n`);
    return 1;
  }
  if (redisServer) logger.info({ pid: redisServer.pid }, 'started a local redis-server');
  const pool = new ShardWorkerPool({ config, shards: allShards(config.shardCount), logger });
  await pool.start();
  const scheduler = new Scheduler(config, logger);
  await scheduler.start();
  const redis = connectRedis(config.redisUrl, { name: 'agentdb-http' });
  const members = new MemberRegistry(redis, keysFor(config.prefix));
  const approvals = new ApprovalService({ redis, prefix: config.prefix, shardCount: config.shardCount, members });
  // Calls made with bearer keys go onto the queue the way a runtime's do.
  const client = new AgentDbClient({ redisUrl: config.redisUrl, prefix: config.prefix, shardCount: config.shardCount, resultTtlS: config.resultTtlS });
  const app = buildApp({
    redis,
    shardCount: config.shardCount,
    ownedShards: () => pool.ownedShards(),
    members,
    approvals,
    logger,
    keyed: {
      auth: new KeyAuthenticator(redis, keysFor(config.prefix)),
      calls: new KeyedCalls(client),
      waitMs: config.httpWaitMs,
      approvalWaitMs: config.mcpApprovalWaitMs,
    },
  });
  const address = await app.listen({ port: config.port, host: config.host });
  logger.info({ address, shards: pool.ownedShards().length }, 'agentdb ready');
  await untilSignal();
  await app.close();
  await approvals.close();
  await client.close();
  await scheduler.stop();
  await pool.stop();
  redis.disconnect();
  redisServer?.kill();
  return 0;
}
