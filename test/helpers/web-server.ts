import { Redis } from 'ioredis';
import type { FastifyInstance } from 'fastify';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { buildApp } from '../../src/http/app.ts';
import { createWebDeps } from '../../src/http/web/web-deps.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { KeyedCalls } from '../../src/calls/bearer-key-calls.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import type { AgentDbClientOptions } from '../../src/calls/client-options.ts';
import type { Sandbox } from './harness.ts';

/** The HTTP app with its web page, listening on a free port of 127.0.0.1, over a sandbox. */
export interface WebServer {
  url: string;
  app: FastifyInstance;
  members: MemberRegistry;
  redis: Redis;
  close(): Promise<void>;
}

/** Starts the app as `agentdb start` builds it (workers come from `box.pool()`). */
export async function startWebServer(
  box: Sandbox,
  opts: {
    heartbeatMs?: number;
    trustProxy?: boolean;
    rateLimits?: AgentDbClientOptions['rateLimits'];
    inboxStreamBounds?: { perCaller: number; perWorkspace: number; total: number };
  } = {},
): Promise<WebServer> {
  const { config } = box;
  const redis = new Redis(config.redisUrl);
  const members = new MemberRegistry(redis, keysFor(config.prefix));
  const approvals = new ApprovalService({ redis, prefix: config.prefix, shardCount: config.shardCount, members });
  const calls = new KeyedCalls(box.client(opts.rateLimits !== undefined ? { rateLimits: opts.rateLimits } : {}));
  const historyOps = new ShardOpClient({ redisUrl: config.redisUrl, prefix: config.prefix });
  const history = new HistoryClient(historyOps, config.shardCount, new AgentRegistry(redis, keysFor(config.prefix)));
  const web = createWebDeps(config, { redis, members, approvals, calls, history });
  const { trustProxy, rateLimits: _, ...webOpts } = opts;
  const app = buildApp({
    redis,
    shardCount: config.shardCount,
    members,
    approvals,
    history,
    web: { ...web.web, ...webOpts },
    ...(trustProxy ? { trustProxy } : {}),
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url,
    app,
    members,
    redis,
    async close() {
      await app.close();
      await web.close();
      await approvals.close();
      await historyOps.close();
      redis.disconnect();
    },
  };
}

/**
 * A new member of `workspace` signed in through the sign-in form, as a browser does: the session
 * cookie (`name=value`) to send with the page's requests.
 */
export async function signedInCookie(web: WebServer, workspace: string, name: string, role: 'member' | 'admin', next = '/data'): Promise<string> {
  const { key } = await web.members.add(workspace, name, role);
  return keyCookie(web, key, next);
}

/** The session cookie (`name=value`) of a sign-in with `key` through the sign-in form, as a browser does. */
export async function keyCookie(web: WebServer, key: string, next = '/data'): Promise<string> {
  const r = await fetch(`${web.url}/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: web.url },
    body: new URLSearchParams({ key, next }).toString(),
  });
  if (r.status !== 303) throw new Error(`sign-in with a key answered ${r.status}`);
  return r.headers.get('set-cookie')!.split(';')[0]!;
}
