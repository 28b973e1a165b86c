import { type Job, UnrecoverableError } from 'bullmq';
import type { ApprovalStore } from '../approvals/approval-store.ts';
import type { CallJobData } from '../contracts/call.ts';
import type { ExecOutcome, ExecRequest, RecordedOutcome } from '../executor/executor-protocol.ts';
import type { RecordedEffect } from '../sqlite/call-record.ts';

/** The tools whose effect an exactly-once record keeps: a run of one that committed can be answered from it. */
const RECORDED_TOOLS: ReadonlySet<string> = new Set(['DATA_WRITE_SQL', 'DATA_DROP_TABLE']);

/** The tools that only read: a run of one changes nothing, so running it again answers what the caller asked. */
const READ_TOOLS: ReadonlySet<string> = new Set(['DATA_QUERY_SQL', 'DATA_DESCRIBE_SCHEMA']);

/**
 * How many times a call's job may stall (its worker killed or stopped while it ran) before BullMQ
 * fails it unrun: its `maxStalledCount`, set from here so {@link replaysStalled} counts the same.
 */
export const STALLS_ALLOWED = 1;

/** Whether `tool` only reads (see {@link READ_TOOLS}). */
export function readsOnly(tool: unknown): boolean {
  return READ_TOOLS.has(String(tool));
}

/**
 * Whether a call job BullMQ would fail unrun for stalling past its limit is run once more. A write
 * or drop is answered from its database's exactly-once record ({@link recordOnly}): its run before
 * may have committed and died before its job completed (a worker SIGKILLed between the two), and
 * failed unrun the agent was answered UNAVAILABLE "it may have run" although the record said it
 * had (session 35, F14). A read is run again, once (session 36, F15): it has no effect, so the
 * caller's answer is its rows, where "it may have run" told it nothing it could act on. Only the
 * first time its count passes the limit: a read that stalls its worker again (one whose result
 * takes the worker's memory) is not run a fourth time, and fails, answered as a read
 * (`failedCallEnvelope`: nothing may still run).
 */
export function replaysStalled(job: Job<CallJobData>): boolean {
  const tool = String(job.data?.tool);
  if (RECORDED_TOOLS.has(tool)) return true;
  return READ_TOOLS.has(tool) && job.stalledCounter <= STALLS_ALLOWED + 1;
}

/**
 * The executor a stalled-out call (`reason`) runs on: a read's own, its agent SQL let through
 * but for an effect (a preview is a parked write's, never a read's); a write's or drop's
 * {@link recordOnly}.
 */
export function stalledExecutor(
  executor: { run(req: ExecRequest): Promise<ExecOutcome> },
  tool: unknown,
  reason: string,
): { run(req: ExecRequest): Promise<ExecOutcome> } {
  if (!readsOnly(tool)) return recordOnly(executor, reason);
  return {
    run(req) {
      if (req.op === 'effect' || req.op === 'write' || req.op === 'drop') throw new UnrecoverableError(reason);
      return executor.run(req);
    },
  };
}

/**
 * The executor a stalled-out call runs on (`reason`, BullMQ's: see `stalledOutOf`): a write or
 * drop answers what its exactly-once record says it committed, as a replay does, and runs
 * nothing; one not committed (or whose record cannot be read) fails its job with `reason`, as
 * BullMQ would have, unrun: the statement may be what killed its workers twice (a child taking
 * the host's memory), so it is run again only when its caller sends it again. No agent SQL runs
 * here: a read or preview fails the same way. agentdb's own requests (the record, the audit row)
 * go through.
 */
export function recordOnly(executor: { run(req: ExecRequest): Promise<ExecOutcome> }, reason: string): { run(req: ExecRequest): Promise<ExecOutcome> } {
  return {
    async run(req) {
      if (req.op === 'query' || req.op === 'describe' || req.op === 'effect') throw new UnrecoverableError(reason);
      if (req.op !== 'write' && req.op !== 'drop') return executor.run(req);
      const effect: RecordedEffect = req.op === 'write' ? ['write', req.sql, req.params] : ['drop', req.table];
      const found = await executor.run({ op: 'recorded', db: req.db, callKey: req.callKey, effect });
      // The key ran another statement: answered as a resend of it would be.
      if (!found.ok && found.error.code === 'IDEMPOTENCY_CONFLICT') return found;
      if (!found.ok || !(found.result as RecordedOutcome).committed) throw new UnrecoverableError(reason);
      return { ok: true, result: (found.result as RecordedOutcome).result, replayed: true };
    },
  };
}

/**
 * Before a stalled-out call that needs a person goes to its parking: only one approved goes on (its
 * release answers from the record, and records the run and the audit row as a run does); any
 * other fails its job with `reason`, unrun, as BullMQ would have: parking it anew would preview
 * the statement (run it, rolled back), and nothing of an unapproved write committed anyway.
 */
export async function approvedToSettle(store: ApprovalStore, job: Job<CallJobData>, reason: string): Promise<void> {
  if ((await store.current(job.id!))?.state !== 'approved') throw new UnrecoverableError(reason);
}
