import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import { KeyedCalls } from '../../src/calls/bearer-key-calls.ts';
import { buildApp } from '../../src/http/app.ts';
import { createOAuthDeps } from '../../src/http/oauth/oauth-deps.ts';
import { createWebDeps } from '../../src/http/web/web-deps.ts';
import { UNCONSENTED_CLIENTS_MAX } from '../../src/oauth/oauth-clients.ts';
import { TOKEN_REQUESTS_PER_MINUTE } from '../../src/oauth/oauth-token-requests.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { KeyAuthenticator } from '../../src/registry/principal.ts';
import { WorkspaceRegistry } from '../../src/registry/workspaces.ts';
import type { Sandbox } from './harness.ts';

/** The app as `agentdb start` builds it (web page, `/mcp`, OAuth), listening on 127.0.0.1. */
export interface OAuthServer {
  url: string;
  app: FastifyInstance;
  members: MemberRegistry;
  redis: Redis;
  /** Moves the clock the OAuth tokens are judged by (to pass an access token's expiry). */
  advance(ms: number): void;
  /** Client id metadata documents the server reads, by URL (in place of the internet). */
  documents: Map<string, unknown>;
  close(): Promise<void>;
}

/**
 * Starts it over `box` (workers come from `box.pool()`), with workspace `acme` registered;
 * `unconsentedClientsMax`: OAUTH_UNCONSENTED_CLIENTS_MAX, `tokenRequestsPerMinute`:
 * OAUTH_TOKEN_REQUESTS_PER_MINUTE (defaults their own), `refreshTtlS`: OAUTH_REFRESH_TOKEN_TTL_S
 * (an hour unless given), `publicUrl`: PUBLIC_URL (none unless given: each request's origin).
 */
export async function startOAuthServer(
  box: Sandbox,
  opts: { unconsentedClientsMax?: number; tokenRequestsPerMinute?: number; refreshTtlS?: number; publicUrl?: string } = {},
): Promise<OAuthServer> {
  const { config } = box;
  const redis = new Redis(config.redisUrl);
  const keys = keysFor(config.prefix);
  const members = new MemberRegistry(redis, keys);
  await new WorkspaceRegistry(redis, keys).put('acme', 'pro');
  const approvals = new ApprovalService({ redis, prefix: config.prefix, shardCount: config.shardCount, members });
  const calls = new KeyedCalls(box.client());
  const web = createWebDeps(config, { redis, members, approvals, calls });
  let skew = 0;
  const documents = new Map<string, unknown>();
  const fetchDocument = async (url: string) => {
    if (!documents.has(url)) throw new Error('HTTP 404');
    return documents.get(url);
  };
  const oauth = createOAuthDeps(
    {
      ...config,
      ...(opts.publicUrl ? { publicUrl: opts.publicUrl } : {}),
      oauth: {
        accessTtlS: 600,
        refreshTtlS: opts.refreshTtlS ?? 3600,
        unconsentedClientsMax: opts.unconsentedClientsMax ?? UNCONSENTED_CLIENTS_MAX,
        tokenRequestsPerMinute: opts.tokenRequestsPerMinute ?? TOKEN_REQUESTS_PER_MINUTE,
      },
    },
    { redis, members },
    { now: () => Date.now() + skew, fetchDocument },
  );
  const app = buildApp({
    redis,
    shardCount: config.shardCount,
    members,
    approvals,
    // The OAuth tests' requests name agentdb.test (test/helpers/oauth-flow.ts), as a public deployment's would.
    keyed: { auth: new KeyAuthenticator(redis, keys), calls, waitMs: 10_000, approvalWaitMs: 10_000, mcpOrigins: { hosts: ['agentdb.test'], origins: [] } },
    web: web.web,
    ...(oauth ? { oauth } : {}),
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url,
    app,
    members,
    redis,
    documents,
    advance(ms) {
      skew += ms;
    },
    async close() {
      await app.close();
      await web.close();
      await approvals.close();
      redis.disconnect();
    },
  };
}
