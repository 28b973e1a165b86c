import { type Job, UnrecoverableError } from 'bullmq';
import type { ApprovalStore } from '../approvals/approval-store.ts';
import type { CallJobData } from '../contracts/call.ts';
import type { ExecOutcome, ExecRequest, RecordedOutcome } from '../executor/executor-protocol.ts';
import type { RecordedEffect } from '../sqlite/call-record.ts';

/** The tools whose effect an exactly-once record keeps: a run of one that committed can be answered from it. */
const RECORDED_TOOLS: ReadonlySet<string> = new Set(['DATA_WRITE_SQL', 'DATA_DROP_TABLE']);

/**
 * Whether a call job BullMQ would fail unrun for stalling past its limit is run once more, to be
 * answered from its database's exactly-once record ({@link recordOnly}): a write or drop. Its run
 * before may have committed and died before its job completed (a worker SIGKILLed between the
 * two), and failed unrun the agent was answered UNAVAILABLE "it may have run" although the
 * record said it had (session 35, F14). A read is failed as before: nothing of it is kept.
 */
export function replaysStalled(job: Job<CallJobData>): boolean {
  return RECORDED_TOOLS.has(String(job.data?.tool));
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
