import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { buildApp } from '../../src/http/app.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { REDIS_URL, sandbox, type Sandbox } from './harness.ts';

/** What {@link withApprovalsApp} makes; `key` holds each member's bearer key by name. */
export interface ApprovalsApp {
  sb: Sandbox;
  redis: Redis;
  client: AgentDbClient;
  members: MemberRegistry;
  approvals: ApprovalService;
  app: FastifyInstance;
  key: Record<string, string>;
}

/**
 * A sandbox with every shard's worker started, a client, and the HTTP app over an approval
 * service, with `opts.members` (`[workspace, name, role]`) added, for the tests of one file: made
 * before them (call it before the file's own `beforeAll`) and closed after; `set` receives them
 * once made. `env` is the sandbox's.
 */
export function withApprovalsApp(
  opts: { env?: Record<string, string>; members: ReadonlyArray<readonly [string, string, 'admin' | 'member']> },
  set: (box: ApprovalsApp) => void,
): void {
  let box: ApprovalsApp | undefined;
  beforeAll(async () => {
    const sb = sandbox(opts.env);
    const redis = new Redis(REDIS_URL);
    const members = new MemberRegistry(redis, keysFor(sb.config.prefix));
    const approvals = new ApprovalService({ redis, prefix: sb.config.prefix, shardCount: sb.config.shardCount, members });
    const app = buildApp({ redis, shardCount: sb.config.shardCount, members, approvals });
    box = { sb, redis, client: sb.client(), members, approvals, app, key: {} };
    await sb.pool();
    for (const [ws, name, role] of opts.members) box.key[name] = (await members.add(ws, name, role)).key;
    set(box);
  }, 60_000);
  afterAll(async () => {
    await box?.app.close();
    await box?.approvals.close();
    box?.redis.disconnect();
    await box?.sb.cleanup();
  });
}
