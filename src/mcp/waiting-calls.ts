import type { Redis } from 'ioredis';
import type { KeyedCalls } from '../calls/bearer-key-calls.ts';
import { PendingCallJoins } from '../calls/pending-call-joins.ts';
import { TaskBudget } from '../calls/task-budget.ts';
import { WorkspaceRedisBudget } from '../calls/workspace-redis-budget.ts';
import type { Keys } from '../redis/keys.ts';
import type { McpServerDeps } from './server.ts';

/**
 * What MCP needs to serve calls that wait for a person (issue 28): tasks for clients that ask for
 * one, and resends that join the waiting call for the others. Both live as long as a waiting
 * call can: its approval's TTL, then its kept result.
 */
export function mcpWaiting(o: {
  redis: Redis;
  keys: Keys;
  calls: KeyedCalls;
  /** APPROVAL_TTL_MS. */
  approvalTtlMs: number;
  /** RESULT_TTL_HOURS, in seconds. */
  resultTtlS: number;
}): Required<Pick<McpServerDeps, 'tasks' | 'joins'>> {
  const ttlMs = o.approvalTtlMs + o.resultTtlS * 1000;
  const joins = new PendingCallJoins(o.redis, o.keys, Math.ceil(ttlMs / 1000));
  return {
    joins,
    tasks: { redis: o.redis, keys: o.keys, calls: o.calls, joins, budget: new TaskBudget(new WorkspaceRedisBudget(o.redis, o.keys), ttlMs), ttlMs },
  };
}
