import type { Redis } from 'ioredis';
import type { Config } from '../config.ts';
import { serviceWorkspaceQuota, type WorkspaceUsage } from '../history/workspace-quota.ts';
import { workspaceLimitSources, type WorkspaceLimits, type WorkspaceLimitSource } from '../policy/plan-limits.ts';
import type { Keys } from '../redis/keys.ts';
import { WorkspaceRedisBudget } from './workspace-redis-budget.ts';

/** The UTC day a call is metered under, e.g. `2026-11-30`. */
export function meterDay(at: number): string {
  return new Date(at).toISOString().slice(0, 10);
}

/** One row of a usage report. */
export interface UsageRow {
  day: string;
  agent: string;
  tool: string;
  calls: number;
  credits: number;
}

/** Reads a workspace's metered usage, oldest day first. */
export async function readUsage(redis: Redis, keys: Keys, workspace: string): Promise<UsageRow[]> {
  const days = (await redis.smembers(keys.usageIndex))
    .map((m) => m.split('|'))
    .filter(([ws]) => ws === workspace)
    .map(([, day]) => day!)
    .sort();
  const rows: UsageRow[] = [];
  for (const day of days) {
    const hash = await redis.hgetall(keys.usage(workspace, day));
    const byKey = new Map<string, UsageRow>();
    for (const [field, value] of Object.entries(hash)) {
      const [agent, tool, what] = field.split('|') as [string, string, 'calls' | 'credits'];
      const row = byKey.get(`${agent}|${tool}`) ?? { day, agent, tool, calls: 0, credits: 0 };
      row[what] = Number(value);
      byKey.set(`${agent}|${tool}`, row);
    }
    rows.push(...[...byKey.values()].sort((a, b) => a.agent.localeCompare(b.agent) || a.tool.localeCompare(b.tool)));
  }
  return rows;
}

/** Everything `agentdb usage` reports of a workspace. */
export interface WorkspaceReport {
  credits: UsageRow[];
  disk: WorkspaceUsage;
  /** Where each disk limit comes from: this process's WORKSPACE_MAX_* where set, else the plan (see `workspaceLimitSources`). */
  diskFrom: Record<keyof WorkspaceLimits, WorkspaceLimitSource>;
  /** Bytes it holds in Redis now, against its budget and where the budget comes from. */
  redis: { held: number; cap: number; from: 'REDIS_BYTES_PER_WORKSPACE' | 'plan' };
}

/**
 * A workspace's metered credits, its disk against its plan, and its Redis bytes against its
 * budget, counted as the workers count them (see `serviceWorkspaceQuota`, `WorkspaceRedisBudget`).
 * The disk figures are read from `config.dataDir`: run where the data folder is.
 */
export async function readWorkspaceReport(
  config: Pick<Config, 'dataDir' | 'workspaceQuota' | 'maxOffloadedBytesPerWorkspace' | 'redisBytesPerWorkspace'>,
  redis: Redis,
  keys: Keys,
  workspace: string,
): Promise<WorkspaceReport> {
  const credits = await readUsage(redis, keys, workspace);
  const disk = await serviceWorkspaceQuota({ config, redis, keys }).quota.usage(workspace);
  const budget = new WorkspaceRedisBudget(redis, keys, config.redisBytesPerWorkspace);
  const { held } = await budget.note(workspace, []);
  const from = config.redisBytesPerWorkspace > 0 ? 'REDIS_BYTES_PER_WORKSPACE' : 'plan';
  return { credits, disk, diskFrom: workspaceLimitSources(config.workspaceQuota), redis: { held, cap: budget.capOf(disk.plan), from } };
}
