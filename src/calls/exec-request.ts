import type { Config } from '../config.ts';
import { databasePath } from '../contracts/database-id.ts';
import type { DropObject } from '../contracts/drop-object.ts';
import type { EffectLimits } from '../contracts/effect.ts';
import type { Plan } from '../contracts/settings.ts';
import type { Param } from '../contracts/tools.ts';
import type { AsOfRead, DbTarget, ExecRequest } from '../executor/executor-protocol.ts';
import type { Target } from '../policy/access.ts';
import type { CallPlan } from '../policy/call-plan.ts';
import { planLimits } from '../policy/plan-limits.ts';
import type { ActivityNote } from '../sqlite/sqlite-activity.ts';

/** A person's approval, as the run of the approved call needs it. */
export interface Approved {
  /** For a drop: the object the person approved dropping. */
  expect?: DropObject;
  /** For a write: the digest of the effect the person approved, and how much of another to keep. */
  effect?: { digest: string; limits: EffectLimits };
  /** Who approved it, for the commit's activity row. */
  by?: string;
}

/** File paths already built, by shard, names and data folder; bounded by clearing when full. */
const paths = new Map<string, string>();
const MAX_PATHS = 4096;

/**
 * The executor's view of one database: its file (built by `databasePath`, remembered: building
 * a path checks both names and resolves four paths, a cost every call paid although agents call
 * the same few databases over and over) and its plan's limits, with the operator's overrides.
 */
export function dbTarget(config: Config, id: string, target: Target, shard: number, plan: Plan): DbTarget {
  const { workspace, agent } = target;
  const key = `${shard}/${workspace}/${agent ?? ''}/${config.dataDir}`;
  let file = paths.get(key);
  if (file === undefined) {
    file = databasePath(config.dataDir, workspace, agent, shard);
    if (paths.size >= MAX_PATHS) paths.clear();
    paths.set(key, file);
  }
  return { id, path: file, shard, limits: planLimits(plan, config.schemaLimits) };
}

/** What the executor runs for a call that passed its checks (parked, it is what the person approves). */
export function execRequest(
  plan: CallPlan,
  callKey: string,
  callId: string,
  config: Config,
  limits: Plan,
  approved: Approved | undefined,
  offload: boolean,
  asOf?: AsOfRead,
): ExecRequest {
  const db = dbTarget(config, plan.databaseId, plan.target, plan.shard, limits);
  const params = (plan.args.params as Param[] | undefined) ?? [];
  switch (plan.tool) {
    case 'DATA_DESCRIBE_SCHEMA':
      return { op: 'describe', db, callId, ...(asOf ? { asOf } : {}) };
    case 'DATA_QUERY_SQL':
      return {
        op: 'query',
        db,
        sql: plan.args.sql as string,
        params,
        maxRows: plan.args.max_rows as number,
        callId,
        ...(plan.request.introspect ? { mode: 'introspect' as const } : {}),
        ...(offload ? { offload: true as const } : {}),
        ...(asOf ? { asOf } : {}),
      };
    case 'DATA_WRITE_SQL': {
      // The row's statement is the write's SQL, which the child has already (`WriteActivityNote`).
      const activity = activityNote(plan, callId, approved);
      return { op: 'write', db, sql: plan.args.sql as string, params, callKey, callId, ...(approved?.effect ? { effect: approved.effect } : {}), activity };
    }
    case 'DATA_DROP_TABLE': {
      const activity = { ...activityNote(plan, callId, approved), statement: plan.args.table as string };
      return { op: 'drop', db, table: plan.args.table as string, callKey, callId, ...(approved?.expect ? { expect: approved.expect } : {}), activity };
    }
  }
}

/** What a write's or drop's commit records of its call (see `sqlite-activity.ts`), but its statement: a write's is its SQL, a drop's its table. */
function activityNote(plan: CallPlan, callId: string, approved: Approved | undefined): Omit<ActivityNote, 'statement'> {
  const { caller } = plan;
  const rationale = plan.args.rationale;
  return {
    tool: plan.tool,
    by: caller.kind === 'agent' ? `agent:${caller.agent}` : `member:${caller.member}`,
    callId,
    ...(typeof rationale === 'string' && rationale ? { rationale } : {}),
    ...(approved?.by ? { approvedBy: approved.by } : {}),
  };
}
