// A statement whose child was SIGKILLed from outside answers UNAVAILABLE, retryable
// (`killedFromOutside`): a kill by an operator, or by the kernel's OOM killer for the host's
// memory, is not the statement's doing. But the OOM killer picks the process with the most
// memory, and on a host with less memory than a child's data-segment limit that is the child
// whose statement takes it: sent again, the statement is killed again, each time (session 33,
// F10's leftover). So the worker remembers the statements killed so: the second kill of the
// same statement on the same database within `WINDOW_MS` is taken for its own, answered
// RESOURCE_LIMIT, which is not retried (a resend under the call id answers it again, and
// runs nothing). Remembered only at a death, so a statement that runs costs nothing here.

import { createHash } from 'node:crypto';
import type { ExecRequest } from './executor-protocol.ts';
import { failure, type Failure } from './death-answers.ts';

/** Kills of one statement within {@link WINDOW_MS} that make it the statement's own. */
export const OUTSIDE_KILLS_LIMIT = 2;
/** How long a kill is remembered after the last one. */
const WINDOW_MS = 10 * 60_000;
/** Statements remembered at most (the oldest forgotten first): a worker's, not a log. */
const KEPT = 256;

/** Statement key → how many kills from outside, and when the last was. */
const kills = new Map<string, { count: number; last: number }>();

/** The statement `req` runs, on its database; undefined for an op that runs no agent's statement. */
function statementOf(req: ExecRequest): string | undefined {
  switch (req.op) {
    case 'query':
    case 'effect':
    case 'write':
      return `${req.db.path}\0${req.op}\0${req.sql}\0${JSON.stringify(req.params)}`;
    case 'drop':
      return `${req.db.path}\0drop\0${req.table}`;
    default:
      return undefined;
  }
}

/**
 * Notes that `req`'s child was SIGKILLed from outside while it ran it, at `now`; answers the
 * failure for it once that statement has been killed {@link OUTSIDE_KILLS_LIMIT} times within
 * the window, else undefined (then it is an outside kill like any other). A write or drop is
 * answered by its record first all the same (`answerAfterDeath`): committed, it answers ok.
 */
export function killedAgain(req: ExecRequest, now = Date.now()): Failure | undefined {
  const statement = statementOf(req);
  if (statement === undefined) return undefined;
  const key = createHash('sha256').update(statement).digest('base64');
  const seen = kills.get(key);
  const count = seen && now - seen.last < WINDOW_MS ? seen.count + 1 : 1;
  kills.delete(key);
  kills.set(key, { count, last: now });
  if (kills.size > KEPT) kills.delete(kills.keys().next().value!);
  if (count < OUTSIDE_KILLS_LIMIT) return undefined;
  const what = req.op === 'write' || req.op === 'drop' ? `the ${req.op} (this time before it committed: nothing of it was written)` : 'the statement';
  return failure(
    'RESOURCE_LIMIT',
    `the database process was killed from outside (signal SIGKILL) ${count} times in ${WINDOW_MS / 60_000} minutes during ${what}; ` +
      'taken for its own memory use (the host out of memory while it ran), so it is not run again under this call id: ask for less at once',
  );
}
