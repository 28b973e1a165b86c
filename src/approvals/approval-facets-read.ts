import type { Keys } from '../redis/keys.ts';
import type { ScriptedRedis } from '../redis/lua-scripts.ts';
import type { ApprovalRequest } from './approval.ts';
import type { ApprovalFacets } from './approval-listing.ts';

/**
 * The small fields of each approval (undefined for one gone), in order. Records made before
 * agent, tool and database were kept beside the request have them read from the request.
 */
export async function readFacets(redis: ScriptedRedis, keys: Keys, ids: string[]): Promise<(ApprovalFacets | undefined)[]> {
  if (!ids.length) return [];
  const pipeline = redis.pipeline();
  for (const id of ids) pipeline.hmget(keys.approval(id), 'workspace', 'state', 'createdAt', 'decidedAt', 'agent', 'tool', 'database');
  const rows = (await pipeline.exec()) ?? [];
  const out = rows.map(([, fields]): ApprovalFacets | undefined => {
    const [workspace, state, createdAt, decidedAt, agent, tool, database] = (fields ?? []) as (string | null)[];
    if (!workspace || !state) return undefined;
    return {
      workspace,
      state,
      createdAt: Number(createdAt),
      ...(decidedAt ? { decidedAt: Number(decidedAt) } : {}),
      agent: agent ?? '',
      tool: tool ?? '',
      database: database ?? '',
    };
  });
  const older = out.flatMap((row, i) => (row && !row.tool ? [i] : []));
  if (older.length) {
    // Read whole once, then kept beside the request: the next list reads only small fields.
    const more = redis.pipeline();
    for (const i of older) more.hget(keys.approval(ids[i]!), 'request');
    const kept: Promise<number>[] = [];
    ((await more.exec()) ?? []).forEach(([, raw], k) => {
      const row = out[older[k]!]!;
      if (typeof raw !== 'string') return;
      const request = JSON.parse(raw) as ApprovalRequest;
      Object.assign(row, { agent: request.agent, tool: request.tool, database: request.database });
      kept.push(redis.agentdbApprovalFacets(keys.approval(ids[older[k]!]!), request.agent, request.tool, request.database));
    });
    await Promise.all(kept);
  }
  return out;
}
