import type { Logger } from '../../src/logger.ts';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import { MemberRegistry, type Role } from '../../src/registry/members.ts';
import type { AgentProfileInput } from '../../src/contracts/agent-profile.ts';
import { buildApp } from '../../src/http/app.ts';
import type { McpOriginPolicy } from '../../src/http/mcp-origin-check.ts';
import type { OffloadedResults } from '../../src/blobs/offloaded-results.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import type { AgentDbClientOptions } from '../../src/calls/client-options.ts';
import { KeyedCalls } from '../../src/calls/bearer-key-calls.ts';
import { keysFor } from '../../src/redis/keys.ts';
import type { HistoryClient } from '../../src/shards/history-client.ts';
import { mcpWaiting } from '../../src/mcp/waiting-calls.ts';
import { AgentKeyRing } from '../../src/registry/agent-keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { KeyAuthenticator } from '../../src/registry/principal.ts';
import { PrincipalCache } from '../../src/registry/principal-cache.ts';
import { WorkspaceRegistry } from '../../src/registry/workspaces.ts';
import { afterAll, beforeAll } from 'vitest';
import { REDIS_URL, sandbox, type Sandbox } from './harness.ts';

/** The HTTP app with key-authenticated routes over a sandbox, and the registry to fill. */
export interface KeyedApp {
  app: FastifyInstance;
  redis: Redis;
  client: AgentDbClient;
  /** The keyed-call core the routes share. */
  calls: KeyedCalls;
  approvals: ApprovalService;
  workspaces: WorkspaceRegistry;
  /** Who keys are, cached as `agentdb start` caches them (so every keyed test runs through it). */
  principals: PrincipalCache;
  /** Registers an agent with `profile` and answers a fresh key for it. */
  agentKey(workspace: string, slug: string, profile: AgentProfileInput): Promise<string>;
  /** Adds a member and answers their key. */
  memberKey(workspace: string, name: string, role: Role): Promise<string>;
  close(): Promise<void>;
}

/** Builds the app (not listening) with `/v1/calls` and `/mcp`, against `sb`'s Redis prefix. */
export function keyedApp(
  sb: Sandbox,
  opts: {
    waitMs?: number;
    approvalWaitMs?: number;
    results?: OffloadedResults;
    rateLimits?: AgentDbClientOptions['rateLimits'];
    onRefused?: (quota: 'rate' | 'redis') => void;
    mcpOrigins?: McpOriginPolicy;
    history?: HistoryClient;
    /** The server's logger (default: silent). */
    logger?: Logger;
  } = {},
): KeyedApp {
  const redis = new Redis(REDIS_URL);
  const keys = keysFor(sb.config.prefix);
  const members = new MemberRegistry(redis, keys);
  const approvals = new ApprovalService({ redis, prefix: sb.config.prefix, shardCount: sb.config.shardCount, members });
  const client = sb.client(opts.rateLimits !== undefined ? { rateLimits: opts.rateLimits } : {});
  const workspaces = new WorkspaceRegistry(redis, keys);
  const agents = new AgentRegistry(redis, keys);
  const ring = new AgentKeyRing(redis, keys, agents);
  const principals = new PrincipalCache(new Redis(REDIS_URL), keys.registryChanges, 60_000);
  void principals.start();
  const calls = new KeyedCalls(client, opts.onRefused);
  const app = buildApp({
    redis,
    shardCount: sb.config.shardCount,
    members,
    approvals,
    ...(opts.history ? { history: opts.history } : {}),
    ...(opts.logger ? { logger: opts.logger } : {}),
    keyed: {
      auth: new KeyAuthenticator(redis, keys, principals),
      calls,
      waitMs: opts.waitMs ?? 10_000,
      approvalWaitMs: opts.approvalWaitMs ?? 10_000,
      mcpWaiting: mcpWaiting({ redis, keys, calls, approvalTtlMs: sb.config.approvalTtlMs, resultTtlS: sb.config.resultTtlS }),
      ...(opts.results ? { results: opts.results } : {}),
      ...(opts.mcpOrigins ? { mcpOrigins: opts.mcpOrigins } : {}),
    },
  });
  return {
    app,
    redis,
    client,
    calls,
    approvals,
    workspaces,
    principals,
    async agentKey(workspace, slug, profile) {
      if (!(await workspaces.get(workspace))) await workspaces.put(workspace, 'pro');
      await agents.put(workspace, slug, profile);
      return (await ring.mint(workspace, slug)).key;
    },
    async memberKey(workspace, name, role) {
      return (await members.add(workspace, name, role)).key;
    },
    async close() {
      principals.close();
      await app.close();
      await approvals.close();
      redis.disconnect();
    },
  };
}

/** What {@link withListeningAgent} makes: the app, the port it listens on, and the agent's key. */
export interface ListeningAgent {
  k: KeyedApp;
  port: number;
  key: string;
}

/**
 * A sandbox with its workers, {@link keyedApp} over it listening on a free port of 127.0.0.1, and
 * agent `workspace/scout` (its own database) with a key, for the tests of one file that send raw
 * HTTP: made before them and closed after; `set` receives them once made.
 */
export function withListeningAgent(workspace: string, set: (box: ListeningAgent) => void): void {
  let sb: Sandbox | undefined;
  let k: KeyedApp | undefined;
  beforeAll(async () => {
    sb = sandbox();
    await sb.pool();
    k = keyedApp(sb);
    const key = await k.agentKey(workspace, 'scout', { displayName: 'A', settings: { database: 'agent' as const } });
    const port = Number(new URL(await k.app.listen({ port: 0, host: '127.0.0.1' })).port);
    set({ k, port, key });
  });
  afterAll(async () => {
    await k?.close();
    await sb?.cleanup();
  });
}
