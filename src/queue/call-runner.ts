import type { CallJobData } from '../contracts/call.ts';
import { errorEnvelope, okEnvelope, type Envelope } from '../contracts/envelope.ts';
import { TOOL_TIERS, type Param } from '../contracts/tools.ts';
import type { Config } from '../config.ts';
import { guardTableName, guardWrite, type GuardVerdict } from '../guard/guard.ts';
import type { Plan } from '../contracts/settings.ts';
import type { Target } from '../policy/access.ts';
import { gateFor } from '../policy/approval-rule.ts';
import { CREDITS } from '../policy/credits.ts';
import { databasePath } from '../store/database-id.ts';
import type { DbTarget, ExecOutcome, ExecRequest } from '../store/executor-protocol.ts';
import { planLimits } from '../store/plan-limits.ts';
import { planCall, type CallPlan } from './call-plan.ts';

/** What running a call needs: the shard's executor and the configuration. */
export interface RunDeps {
  config: Config;
  executor: { run(req: ExecRequest): Promise<ExecOutcome> };
}

/** A finished call: its envelope, and the credits to meter (none for a replayed write). */
export interface RunOutcome {
  envelope: Envelope;
  meter: number | undefined;
}

/** A call that passed every check and now waits for a person. */
export interface ParkOutcome {
  park: CallPlan;
}

/**
 * Runs one call the way a shard worker does: validate → authorize → gate (sandbox, approval)
 * → guard → executor. Every agent-caused failure comes back as an `ok: false` envelope;
 * only faults (bugs, a dead Redis) throw.
 */
export async function runCall(
  data: CallJobData,
  shard: number,
  deps: RunDeps,
  opts: { approved?: boolean } = {},
): Promise<RunOutcome | ParkOutcome> {
  const { callId } = data;
  const planned = planCall(
    { callId, workspace: data.workspace, agent: data.agent, settings: data.settings, tool: data.tool, arguments: data.arguments },
    deps.config.shardCount,
  );
  if (!planned.ok) {
    const f = planned.failure;
    return { envelope: errorEnvelope(callId, f.tool, f.code, f.detail), meter: undefined };
  }
  const plan = planned.plan;
  const fail = (code: Parameters<typeof errorEnvelope>[2], detail: string): RunOutcome => ({
    envelope: errorEnvelope(callId, plan.tool, code, detail),
    meter: undefined,
  });
  if (plan.shard !== shard) return fail('INTERNAL', `call for shard ${plan.shard} arrived on shard ${shard}`);

  const verdict = guardFirstLayer(plan);
  if (!verdict.ok) return fail(verdict.code, verdict.reason);

  const gate = gateFor(plan.caller, TOOL_TIERS[plan.tool]);
  if (gate.kind === 'refuse') return fail(gate.code, gate.detail);
  const request = execRequest(plan, callId, deps.config);
  if (gate.kind === 'approval' && !opts.approved) {
    // A person is only asked about a statement that would run: SQLite's own verdict too. A
    // write's missing table is no refusal (an earlier parked CREATE may make it before this
    // runs), but a drop of nothing is answered NOT_FOUND now: nobody should have to approve it.
    if (request.op === 'write') {
      const check = await deps.executor.run({ op: 'check', db: request.db, sql: request.sql, mode: 'write', callId });
      if (!check.ok && check.error.code !== 'SQL_ERROR') return fail(check.error.code, check.error.detail);
    }
    if (request.op === 'drop') {
      const check = await deps.executor.run({ op: 'checkDrop', db: request.db, table: request.table, callId });
      if (!check.ok) return fail(check.error.code, check.error.detail);
    }
    return { park: plan };
  }

  const outcome = await deps.executor.run(request);
  if (!outcome.ok) return fail(outcome.error.code, outcome.error.detail);
  const credits = CREDITS[plan.tool];
  return {
    envelope: okEnvelope(callId, plan.tool, credits, outcome.result as Record<string, unknown>),
    meter: outcome.replayed ? undefined : credits,
  };
}

/**
 * The tokenizer's verdict on calls that may wait for a person, so nobody is asked about a
 * statement that would be refused. Reads never wait: the executor runs both guard layers on
 * every statement anyway, and checking reads here too would pay for the tokenizer twice on the
 * hottest path.
 */
function guardFirstLayer(plan: CallPlan): GuardVerdict | { ok: true } {
  switch (plan.tool) {
    case 'DATA_WRITE_SQL':
      return guardWrite(plan.args.sql as string);
    case 'DATA_DROP_TABLE':
      return guardTableName(plan.args.table as string);
    case 'DATA_QUERY_SQL':
    case 'DATA_DESCRIBE_SCHEMA':
      return { ok: true };
  }
}

/** File paths already built, by shard, names and data folder; bounded by clearing when full. */
const paths = new Map<string, string>();
const MAX_PATHS = 4096;

/**
 * The executor's view of one database: its file (built by `databasePath`, remembered: building
 * a path checks both names and resolves four paths, a cost every call paid although agents call
 * the same few databases over and over) and its plan's limits.
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
  return { id, path: file, shard, limits: planLimits(plan) };
}

function execRequest(plan: CallPlan, callId: string, config: Config): ExecRequest {
  const db = dbTarget(config, plan.databaseId, plan.target, plan.shard, plan.request.settings.plan);
  const params = (plan.args.params as Param[] | undefined) ?? [];
  switch (plan.tool) {
    case 'DATA_DESCRIBE_SCHEMA':
      return { op: 'describe', db, callId };
    case 'DATA_QUERY_SQL':
      return { op: 'query', db, sql: plan.args.sql as string, params, maxRows: plan.args.max_rows as number, callId };
    case 'DATA_WRITE_SQL':
      return { op: 'write', db, sql: plan.args.sql as string, params, callId };
    case 'DATA_DROP_TABLE':
      return { op: 'drop', db, table: plan.args.table as string, callId };
  }
}
