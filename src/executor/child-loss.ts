// What the kill of a child at a deadline and its death on its own share: which request answers
// for the loss and what it cost, the log line and the count, and what goes back to the pool.
// Moved out of executor-process.ts, which keeps what the child was sent, charges the cost,
// replaces the child and hands back what is left.

import type { ExecutorProcessOptions } from './executor-options.ts';
import type { Queued } from './executor-process.ts';
import type { ExecRequest } from './executor-protocol.ts';
import { answerAfterDeath, type Failure, failure, lostAnswers } from './death-answers.ts';
import { about } from './executor-status.ts';
import { killedAgain, rememberedKill } from './outside-kills.ts';
import type { Unanswered } from './statement-marks.ts';

/** A lost child's requests as its marks sorted them (see `StatementMarks.sort`). */
type Sorted = Unanswered<{ item: Queued }>;

/** What a loss leaves to its place. */
export interface Loss {
  /** The request the child was running, which answers for the loss; none when it was idle. */
  running?: Queued;
  /** The executor time `running` is charged. */
  ms: number;
  /**
   * What goes back to the pool, in order: those it had finished (their answers lost, run
   * again), the record lookup of a write that answers for it, those it never started.
   */
  back: Queued[];
}

/** Where a loss is told: the place's logger and metrics, its index, the child's pid. */
export interface LossLog {
  opts: Pick<ExecutorProcessOptions, 'logger' | 'metrics' | 'outsideKills'>;
  child: number;
  childPid: number | undefined;
}

/**
 * The running statement passed its limit (`limitOf`), its answer not in the channel: its child
 * is killed, and it answers STATEMENT_TIMEOUT, or by its record if a write. `head` is the head of
 * what the child was sent, which answers when the marks name none running.
 */
export function killedAtDeadline(sorted: Sorted, head: { item: Queued }, limitOf: (req: ExecRequest) => number, log: LossLog): Loss & { running: Queued } {
  let { finished, running, unread } = sorted;
  if (!running) {
    // Nothing marked running: the head answers for the deadline, as before marks existed.
    running = head;
    finished = finished.filter((s) => s !== head);
    unread = unread.filter((s) => s !== head);
  }
  const limit = limitOf(running.item.req);
  log.opts.logger?.warn(
    { ...about(running.item.req), child: log.child, childPid: log.childPid, ms: limit, rerun: finished.length },
    'statement timed out; killing its executor child',
  );
  log.opts.metrics?.executorKills.inc({ reason: 'timeout' });
  // A write may have committed at its very deadline, its answer not yet written.
  const lookup = answerAfterDeath(running.item, failure('STATEMENT_TIMEOUT', `its limit is ${limit} ms`), log.opts.logger, log.child);
  return { running: running.item, ms: limit, back: handedBack(finished, lookup, unread) };
}

/**
 * The child is gone, and every mark it wrote is in its marks file: only the request it was
 * running answers for the death (after `ms` of it). Those it had finished lost their answers
 * with it and run again; those it never started run elsewhere.
 */
export function diedOnItsOwn(sorted: Sorted, ms: number, code: number | null, signal: NodeJS.Signals | null, log: LossLog): Loss {
  const { finished, running, unread } = sorted;
  const { logger, metrics } = log.opts;
  let lookup: Queued | undefined;
  if (running) {
    logger?.error(
      { ...about(running.item.req), child: log.child, childPid: log.childPid, code, signal, rerun: finished.length },
      'executor child died during a statement',
    );
    // Killed from outside again during the same statement: its own memory (`outside-kills.ts`).
    const counts = log.opts.outsideKills;
    const died =
      signal === 'SIGKILL'
        ? counts
          ? killedFromOutside(running.item.req)
          : (killedAgain(running.item.req) ?? killedFromOutside(running.item.req))
        : diedOfItsStatement(code, signal);
    const item = signal === 'SIGKILL' && counts ? rememberedKill(running.item, died, counts) : running.item;
    lookup = answerAfterDeath(item, died, logger, log.child);
  } else logger?.warn({ child: log.child, childPid: log.childPid, code, signal, unread: unread.length, rerun: finished.length }, 'executor child exited');
  metrics?.executorKills.inc({ reason: !running ? 'exited' : signal === 'SIGKILL' ? 'killed' : 'resource' });
  return {
    ...(running ? { running: running.item } : {}),
    ms,
    back: handedBack(finished, lookup, unread),
  };
}

/**
 * A child that dies on its own in the middle of a statement, by a signal other than SIGKILL or
 * an exit code, was stopped by its statement: V8 aborts (SIGABRT) past the data-segment limit,
 * as SQLite's failed malloc does. Answered with a code that is not retried, so the same
 * statement cannot crash the next child.
 */
function diedOfItsStatement(code: number | null, signal: NodeJS.Signals | null): Failure {
  return failure(
    'RESOURCE_LIMIT',
    `the statement stopped the database process (${signal ? `signal ${signal}` : `exit code ${code}`}); it used too much memory or resources`,
  );
}

/**
 * A SIGKILL the worker did not send (its own, at a deadline or a replacement, are heard as
 * such): an operator's, or the kernel's OOM killer's, which picks a process by the host's
 * memory, not by a statement's (the data-segment limit stops a statement first). Not the
 * statement's doing, so not RESOURCE_LIMIT: UNAVAILABLE, retryable, not metered. A write or
 * drop gets this only once its record says it did not commit (`answerAfterDeath`), so its
 * "nothing of it was written" is read, not assumed; a restore's, snapshot's or audit's outcome
 * is not known here.
 */
function killedFromOutside(req: ExecRequest): Failure {
  const killed = 'the database process was killed from outside (signal SIGKILL: an operator, or the host out of memory)';
  if (req.op === 'write' || req.op === 'drop') {
    return failure('UNAVAILABLE', `${killed} during the ${req.op}, before it committed: nothing of it was written; send it again under its call id`);
  }
  if (req.op === 'audit' || req.op === 'restore' || req.op === 'restoreInto' || req.op === 'snapshot') {
    return failure('UNAVAILABLE', `${killed} during the ${req.op}; whether it finished is not known here: agentdb history shows what it did`);
  }
  // The lookup of a write's record: its failure becomes that write's "could not be read" (`answerAfterDeath`).
  if (req.op === 'recorded') return failure('UNAVAILABLE', `${killed} while it read the record`);
  return failure('UNAVAILABLE', `${killed} during the statement; nothing was changed: send it again`);
}

/**
 * What goes to another child after a loss, in order: the finished requests whose answers were
 * lost, the lookup of what the running one did (when it may have committed), the unread ones.
 */
function handedBack(finished: Sorted['finished'], lookup: Queued | undefined, unread: Sorted['unread']): Queued[] {
  return [...lostAnswers(finished), ...(lookup ? [lookup] : []), ...unread.map((s) => s.item)];
}
