import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';

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
