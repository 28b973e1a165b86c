// What answers the requests a dead (or killed) child had in hand: moved out of
// executor-process.ts, which keeps what the child was sent and calls these only when it dies.

import type { ErrorCode } from '../errors.ts';
import type { RecordedEffect } from '../sqlite/call-record.ts';
import type { ExecutorLogger } from './executor-options.ts';
import type { Queued } from './executor-process.ts';
import type { ExecOutcome, RecordedOutcome } from './executor-protocol.ts';
import { about } from './executor-status.ts';

/**
 * Children a record lookup may see die before the write it asks about answers "unknown": the
 * lookup is one primary-key read, so only something killing children from outside gets here.
 */
const LOOKUP_ATTEMPTS = 3;

/** A request reading the record of a write whose child died; `attempt` counts lookups sent. */
type Lookup = Queued & { attempt?: number };

export type Failure = Extract<ExecOutcome, { ok: false }>;

export const failure = (code: ErrorCode, detail: string): Failure => ({ ok: false, error: { code, detail } });

/**
 * Requests a dead child had finished, whose answers died with it (the answer of one was still
 * being written, or waited for the batch's end, when a later statement killed the child): they
 * run again on the next child, and are answered and metered once, as if nothing happened. A
 * write or drop finds its exactly-once record there and answers what it committed (without
 * `replayed`: its caller never had an answer, and a replay is not metered), or runs if it did
 * not commit. A restore or snapshot is not done twice: it answers that its answer was lost.
 */
export function lostAnswers(finished: { item: Queued }[]): Queued[] {
  const again: Queued[] = [];
  for (const { item } of finished) {
    const req = item.req;
    if (req.op === 'restore' || req.op === 'restoreInto' || req.op === 'snapshot') {
      item.resolve(
        failure('UNAVAILABLE', `the ${req.op} finished, but the database process died before its answer was sent; agentdb history shows what it did`),
      );
    } else if (req.op === 'write' || req.op === 'drop') {
      again.push({ req, resolve: (outcome) => item.resolve(outcome.ok && outcome.replayed ? { ok: true, result: outcome.result } : outcome) });
    } else again.push(item);
  }
  return again;
}

/**
 * Answers `item`, whose child died under it, with `failure`, unless it is a write or drop:
 * then returns the request that reads its record on another child (first in its line), and
 * the record answers it. A lookup whose own child dies is sent again, a few times. `child` is
 * the place's index, for the log line.
 */
export function answerAfterDeath(item: Queued, died: Failure, logger: ExecutorLogger | undefined, child: number): Queued | undefined {
  const req = item.req;
  if (req.op === 'recorded') {
    const attempt = (item as Lookup).attempt ?? 1;
    if (attempt < LOOKUP_ATTEMPTS) return { ...item, attempt: attempt + 1 } as Lookup;
    item.resolve(died);
    return undefined;
  }
  if (req.op !== 'write' && req.op !== 'drop') {
    item.resolve(died);
    return undefined;
  }
  const effect: RecordedEffect = req.op === 'write' ? ['write', req.sql, req.params] : ['drop', req.table];
  const lookup: Lookup = {
    req: { op: 'recorded', db: req.db, callKey: req.callKey, effect, ...(req.callId ? { callId: req.callId } : {}) },
    resolve: (outcome) => {
      if (!outcome.ok) {
        // The record answered for the key (it ran another statement), or could not be read.
        if (outcome.error.code === 'IDEMPOTENCY_CONFLICT') return item.resolve(outcome);
        const why = `the database process died during the ${req.op} (${deathOf(died)}) and whether it committed could not be read: ${outcome.error.detail}`;
        return item.resolve({ ...failure('UNAVAILABLE', why), unsettled: true });
      }
      const recorded = outcome.result as RecordedOutcome;
      logger?.warn({ ...about(req), child, committed: recorded.committed }, 'read the record of a write whose child died');
      item.resolve(recorded.committed ? { ok: true, result: recorded.result } : died);
    },
  };
  return lookup;
}

/** How the child died, for a lookup that could not tell: the failure's code, or a kill from outside. */
function deathOf(died: Failure): string {
  return died.error.code === 'UNAVAILABLE' ? 'killed from outside, SIGKILL' : died.error.code;
}
