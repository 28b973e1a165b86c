import type { Redis } from 'ioredis';
import type { ApprovalService } from '../../approvals/approval-service.ts';
import type { MemberRegistry } from '../../registry/members.ts';
import type { Config } from '../../config.ts';
import { connectRedis } from '../../redis/connection.ts';
import { DataBrowser } from '../../shards/data-browser.ts';
import type { KeyedCalls } from '../../calls/bearer-key-calls.ts';
import { keysFor } from '../../redis/keys.ts';
import { ShardOpClient } from '../../shards/shard-op-client.ts';
import { ExportSlots } from '../../shards/export-slots.ts';
import { AgentRegistry } from '../../registry/agents.ts';
import type { HistoryAccess } from './history-routes.ts';
import { LiveEvents } from './live-events.ts';
import type { WebDeps } from './web-routes.ts';
import { WebSessions } from '../../registry/web-sessions.ts';
import { RestoreOnce } from '../../shards/restore-once.ts';
import { WorkspaceRedisBudget } from '../../calls/workspace-redis-budget.ts';
import { WorkspaceRegistry } from '../../registry/workspaces.ts';

/**
 * Everything the web page needs beyond what `/v1` has, made from the config by an entry point
 * (`agentdb start`, tests), with the one function that closes what it opened.
 */
export function createWebDeps(
  config: Config,
  shared: { redis: Redis; members: MemberRegistry; approvals: ApprovalService; calls: KeyedCalls; history?: HistoryAccess },
): { web: WebDeps; close(): Promise<void> } {
  const keys = keysFor(config.prefix);
  const workspaces = new WorkspaceRegistry(shared.redis, keys);
  const ops = new ShardOpClient({ redisUrl: config.redisUrl, prefix: config.prefix });
  const events = new LiveEvents(shared.redis, () => connectRedis(config.redisUrl, { blocking: true, name: 'agentdb-web-events' }), keys.events);
  const web: WebDeps = {
    members: shared.members,
    approvals: shared.approvals,
    calls: shared.calls,
    sessions: new WebSessions(shared.redis, keys, config.webSessionTtlS),
    browser: new DataBrowser({
      ops,
      agents: new AgentRegistry(shared.redis, keys),
      shardCount: config.shardCount,
      exports: new ExportSlots(config.exportBounds),
      exportMaxBytes: config.exportMaxBytes,
      stallMs: config.downloadStallMs,
    }),
    events,
    // A restore submission's records count against its workspace's Redis budget (session 33, T11).
    restoreOnce: new RestoreOnce(shared.redis, keys, {
      budget: { budget: new WorkspaceRedisBudget(shared.redis, keys, config.redisBytesPerWorkspace), planOf: (w) => workspaces.planOf(w) },
    }),
    ...(shared.history ? { history: shared.history } : {}),
  };
  return {
    web,
    async close() {
      await events.close();
      await ops.close();
    },
  };
}
