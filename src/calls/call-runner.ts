import { AgentDbError, codeOf, type ErrorCode } from '../errors.ts';
import type { CallJobData } from '../contracts/call.ts';
import { callerSinceOf, callFingerprint, callKeyOf } from '../contracts/call-identity.ts';
import type { Effect } from '../contracts/effect.ts';
import { errorEnvelope, okEnvelope, type Envelope } from '../contracts/envelope.ts';
import { TOOL_TIERS } from '../contracts/tools.ts';
import type { Config } from '../config.ts';
import { guardTableName, guardWrite, type GuardVerdict } from '../guard/guard.ts';
import { UNREGISTERED_PLAN } from '../contracts/settings.ts';
import { gateFor } from '../policy/approval-rule.ts';
import { CREDITS, METERED_FAILURES } from '../policy/credits.ts';
import { parseDatabaseId } from '../contracts/database-id.ts';
import type { ExecOutcome, ExecRequest } from '../executor/executor-protocol.ts';
import type { OffloadedResults } from '../blobs/offloaded-results.ts';
import type { WorkspaceQuota } from '../history/workspace-quota.ts';
import type { SpilledResult } from '../sqlite/result-spill.ts';
import { planCall, type CallPlan } from '../policy/call-plan.ts';
import { missingTableNote } from '../policy/missing-table-note.ts';
import type { CallIdLedger, LedgerClaim } from './call-id-ledger.ts';
import { asOfTarget, runAsOf } from './as-of-run.ts';
import { type Approved, execRequest } from './exec-request.ts';
import { databaseMade } from './made-databases.ts';

/** What running a call needs: the shard's executor and the configuration. */
export interface RunDeps {
  config: Config;
  executor: { run(req: ExecRequest): Promise<ExecOutcome> };
  /** Where a query result past MAX_RESULT_BYTES goes whole; without it, such a result is only cut. */
  results?: OffloadedResults;
  /** Where a caller's own call ids are taken on disk too; without it, only their Redis claims hold them. */
  callIds?: CallIdLedger;
  /** A workspace's disk quotas: a write that would create a database is checked first, any other against its bytes. */
  quota?: Pick<WorkspaceQuota, 'check' | 'hold' | 'writesRefusal'>;
}

/**
 * A finished call: its envelope, and the credits to meter (none for a failure other than
 * {@link METERED_FAILURES}).
 */
export interface RunOutcome {
  envelope: Envelope;
  meter: number | undefined;
  /**
   * A write's or drop's ok: metered once for its job, by whichever run announces it first. The
   * run that committed it may have died before it metered (a SIGKILLed worker), and the job's
   * next run answers from the exactly-once record (a replay): metering replays never left such a
   * write unmetered, metering every run charged twice a write whose first run did meter (review F1).
   */
  meterOnce?: true;
  /**
   * The database's exactly-once record holds the call's key for another statement: this call
   * ran nothing (IDEMPOTENCY_CONFLICT), and the id is that recorded call's, in this database
   * (see `yieldToRecord`).
   */
  heldByRecord?: { shard: number; database: string };
  /**
   * The call-id ledger holds the call's id for another call (`CallIdLedger`): this call ran
   * nothing (IDEMPOTENCY_CONFLICT), and the id is that call's (see `yieldClaim`).
   */
  heldByLedger?: { held: LedgerClaim; from: string };
  /** An approved write whose effect changed since it was approved: nothing ran, and this is its effect now. */
  effectChanged?: Effect;
  /** A read of the past that ran: its moment found kept, or restored for it (`agentdb_as_of_reads_total`). */
  asOf?: 'kept' | 'restored';
}

/** A call that passed every check and needs a person: its plan and what it would run. */
export interface ParkOutcome {
  park: CallPlan;
  request: ExecRequest;
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
  approved?: Approved,
  /** The UTF-8 bytes of the JSON text `data` was read from, when known (see `planCall`). */
  dataBytes?: number,
): Promise<RunOutcome | ParkOutcome> {
  const { callId } = data;
  const planned = planCall(
    {
      callId,
      workspace: data.workspace,
      agent: data.agent,
      settings: data.settings,
      ...(data.member ? { member: data.member } : {}),
      ...(data.introspect ? { introspect: true } : {}),
      tool: data.tool,
      arguments: data.arguments,
    },
    deps.config.shardCount,
    deps.config.maxCallBytes,
    dataBytes,
  );
  if (!planned.ok) {
    const f = planned.failure;
    return { envelope: errorEnvelope(callId, f.tool, f.code, f.detail), meter: undefined };
  }
  const plan = planned.plan;
  const fail = (code: Parameters<typeof errorEnvelope>[2], detail: string): RunOutcome => ({
    envelope: errorEnvelope(callId, plan.tool, code, detail),
    meter: METERED_FAILURES.has(code) ? CREDITS[plan.tool] : undefined,
  });
  if (plan.shard !== shard) return fail('INTERNAL', `call for shard ${plan.shard} arrived on shard ${shard}`);
  const fingerprint = data.ownId && deps.callIds ? callFingerprint({ ...data, database: plan.databaseId }) : undefined;
  if (fingerprint !== undefined) {
    // Before anything runs or parks: the id is this call's on disk from now, or another's.
    const mine = { shard: plan.shard, database: plan.databaseId, fingerprint };
    const held = deps.callIds!.take(data.workspace, callKeyOf(data), mine, data.enqueuedAt);
    if (held) return { ...fail('IDEMPOTENCY_CONFLICT', usedFor(callId, held)), heldByLedger: { held, from: fingerprint } };
  }

  const gate = gateFor(plan.caller, TOOL_TIERS[plan.tool]);
  if (gate.kind === 'refuse') return fail(gate.code, gate.detail);
  const asOf =
    typeof plan.args.as_of === 'string'
      ? { target: asOfTarget(plan.args.as_of, data.workspace, data.agent, plan.target.agent, callerSinceOf(data)) }
      : undefined;
  // A workspace whose offloaded results are at their quota writes no spill file only to delete it.
  const offloadRefused = plan.tool === 'DATA_QUERY_SQL' ? deps.results?.refusal(data.workspace) : undefined;
  const offload = deps.results !== undefined && offloadRefused === undefined;
  const request = execRequest(plan, callKeyOf(data), callId, deps.config, data.plan ?? UNREGISTERED_PLAN, approved, offload, asOf);
  if (gate.kind === 'approval' && !approved) {
    const verdict = guardFirstLayer(plan);
    if (!verdict.ok) return fail(verdict.code, verdict.reason);
    return { park: plan, request };
  }

  if (request.op === 'write' && deps.quota && !databaseMade(request.db.path)) {
    // The first write creates the database: a new agent's, or the workspace's shared one. Two
    // first writes at once may both pass (each sees the other's database not yet made): the
    // quota is passed by at most the shard's concurrency, never without bound.
    try {
      await deps.quota.check(parseDatabaseId(plan.databaseId).workspace, { databases: 1, bytes: 0 }, `creating database ${plan.databaseId}`);
    } catch (err) {
      if (codeOf(err) !== 'QUOTA_EXCEEDED') throw err;
      return fail('QUOTA_EXCEEDED', (err as AgentDbError).detail ?? 'the workspace is past its disk quota');
    }
  }
  // A workspace past its bytes writes no more (drops still free room); the child refuses it after
  // the replay, so a write already committed answers what it did.
  const overQuota = request.op === 'write' && deps.quota ? await deps.quota.writesRefusal(parseDatabaseId(plan.databaseId).workspace) : undefined;
  if (overQuota !== undefined && request.op === 'write') request.overQuota = overQuota;
  const outcome =
    (request.op === 'query' || request.op === 'describe') && request.asOf
      ? await runAsOf({ ...request, asOf: request.asOf }, deps.executor, deps.quota, parseDatabaseId(plan.databaseId).workspace)
      : await deps.executor.run(request);
  // Not an answer: a fault, so BullMQ runs the call again, and its record replays it if it did commit.
  if (!outcome.ok && outcome.unsettled) throw new AgentDbError(outcome.error.code, outcome.error.detail);
  if (!outcome.ok && outcome.error.code === 'IDEMPOTENCY_CONFLICT' && (request.op === 'write' || request.op === 'drop')) {
    // The database's record holds the id for a call the ledger never saw (made before it
    // existed): the id is that call's, not this one's, on disk as in Redis.
    if (fingerprint !== undefined) deps.callIds!.release(data.workspace, callKeyOf(data), fingerprint);
    return { ...fail(outcome.error.code, outcome.error.detail), heldByRecord: { shard: plan.shard, database: plan.databaseId } };
  }
  if (!outcome.ok && outcome.effect) return { ...fail(outcome.error.code, outcome.error.detail), effectChanged: outcome.effect };
  if (!outcome.ok) {
    const note = outcome.error.code === 'SQL_ERROR' ? missingTableNote(plan.caller, plan.args, plan.target, outcome.error.detail) : undefined;
    return fail(outcome.error.code, note === undefined ? outcome.error.detail : `${outcome.error.detail}. ${note}`);
  }
  const credits = CREDITS[plan.tool];
  let result = outcome.result as Record<string, unknown>;
  if (result.spill && deps.results) result = await offloaded(result, deps.results, { workspace: data.workspace, agent: data.agent, callId });
  else if (offloadRefused !== undefined && result.oversize) result = { ...result, note: notOffloaded(offloadRefused) };
  return {
    envelope: okEnvelope(callId, plan.tool, credits, result),
    meter: credits,
    ...(request.op === 'write' || request.op === 'drop' ? { meterOnce: true as const } : {}),
    ...(outcome.asOf ? { asOf: outcome.asOf.materialised ? ('restored' as const) : ('kept' as const) } : {}),
  };
}

/** The refusal of a call whose id the ledger holds for another call. */
function usedFor(callId: string, held: LedgerClaim): string {
  return `Call id ${JSON.stringify(callId)} was already used for another call (in database ${held.database}); nothing ran, and the id answers the first call: send that call again under the id for its outcome.`;
}

/**
 * A query result the executor also wrote whole to a file: the file goes to the blob store and
 * the envelope keeps the rows that fitted as a preview, with where the rest is. When the store
 * fails, the call still answers with the preview, cut as before offloading existed, and says
 * so: re-running the whole query on a retry would cost more than the rows it could not keep.
 */
async function offloaded(
  result: Record<string, unknown>,
  results: OffloadedResults,
  owner: Parameters<OffloadedResults['keep']>[1],
): Promise<Record<string, unknown>> {
  const { spill, ...rest } = result;
  try {
    const spilled = spill as SpilledResult;
    const offloaded = await results.keep(spilled, owner);
    if (spilled.capped) {
      return {
        ...rest,
        offloaded: { ...offloaded, capped: true, maxBytes: spilled.capped.maxBytes },
        note: `the result is offloaded but cut at ${spilled.capped.maxBytes} bytes (MAX_OFFLOAD_BYTES): it holds the first ${spilled.rows} rows; select fewer or smaller rows (LIMIT/OFFSET) for the rest — GET /v1/results/<offloaded.id> or agentdb result-blob <id>`,
      };
    }
    return { ...rest, offloaded, note: 'the whole result is offloaded: GET /v1/results/<offloaded.id> or agentdb result-blob <id>' };
  } catch (err) {
    if (codeOf(err) === 'LIMIT_EXCEEDED') return { ...rest, note: notOffloaded(String((err as { detail?: string }).detail)) };
    return {
      ...rest,
      note: `the rows past the size limit could not be offloaded (${String((err as Error).message).slice(0, 120)}); run the query again later for all of them`,
    };
  }
}

/**
 * The tokenizer's verdict on a call about to wait for a person, so nobody is asked about a
 * statement that would be refused. Only there: the executor runs both guard layers on every
 * statement anyway, and this process also serves HTTP and every shard's worker, so a tenant's
 * large statements tokenized here would stall every other tenant's calls for free.
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

/** A call that ran nothing and answers `code`: no metering (a refusal, a failed approval). */
export function failedRun(data: Pick<CallJobData, 'callId' | 'tool'>, code: ErrorCode, detail: string): RunOutcome {
  return { envelope: errorEnvelope(data.callId, data.tool, code, detail), meter: undefined };
}

/** The note of a result cut to its envelope because its workspace's offloaded results are at their quota (`why`). */
function notOffloaded(why: string): string {
  // It said "run it again once they expire": they count a day past that, read or not (session 35, N11).
  return `the rows past the size limit were not offloaded: ${why}; select fewer rows (LIMIT/OFFSET), or run it again once room comes back (a result offloaded earlier counts until a day past its expiry, read or not)`;
}
