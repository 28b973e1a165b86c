// A statement whose child was SIGKILLed from outside answers UNAVAILABLE, retryable
// (`killedFromOutside`): a kill by an operator, or by the kernel's OOM killer for the host's
// memory, is not the statement's doing. But the OOM killer picks the process with the most
// memory, and on a host with less memory than a child's data-segment limit that is the child
// whose statement takes it: sent again, the statement is killed again, each time (session 33,
// F10's leftover). So the worker remembers the statements killed so: the second kill of the
// same statement on the same database within `WINDOW_MS` is taken for its own, answered
// RESOURCE_LIMIT, which is not retried (a resend under the call id answers it again, and
// runs nothing). Remembered only at a death, so a statement that runs costs nothing here.
// Remembered in this process's memory, and in Redis when the worker gives it a store
// (`OutsideKillCounts`, src/redis/outside-kill-counts.ts): a worker started again, or the shard
// moved to another worker between two kills, forgot the first and answered the second
// "try again" too (session 34, F11's leftover; session 35, F14).

import { createHash } from 'node:crypto';
import { parseDatabaseId } from '../contracts/database-id.ts';
import type { Queued } from './executor-process.ts';
import type { ExecOutcome, ExecRequest } from './executor-protocol.ts';
import { failure, type Failure } from './death-answers.ts';

/** Kills of one statement within {@link WINDOW_MS} that make it the statement's own. */
export const OUTSIDE_KILLS_LIMIT = 2;
/** How long a kill is remembered after the last one. */
const WINDOW_MS = 10 * 60_000;
/** Statements remembered at most (the oldest forgotten first): a worker's, not a log. */
const KEPT = 256;
/** Statements a workspace has remembered in Redis at most (the one killed longest ago forgotten first). */
export const KEPT_PER_WORKSPACE = 32;

/**
 * Where kills from outside are remembered beyond this process (the worker's Redis): one note per
 * kill, nothing while statements run.
 */
export interface OutsideKillCounts {
  /** Notes one kill of the statement `digest` in `workspace`; answers its count within `windowMs` of each kill, this one included. */
  note(workspace: string, digest: string, windowMs: number, cap: number): Promise<number>;
}

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

/** The digest a statement is remembered under; undefined for an op that runs no agent's statement. */
function digestOf(req: ExecRequest): string | undefined {
  const statement = statementOf(req);
  return statement === undefined ? undefined : createHash('sha256').update(statement).digest('base64');
}

/** Notes one kill of `digest` in this process's memory; answers its count within the window. */
function countInMemory(digest: string, now: number): number {
  const seen = kills.get(digest);
  const count = seen && now - seen.last < WINDOW_MS ? seen.count + 1 : 1;
  kills.delete(digest);
  kills.set(digest, { count, last: now });
  if (kills.size > KEPT) kills.delete(kills.keys().next().value!);
  return count;
}

/**
 * Notes that `req`'s child was SIGKILLed from outside while it ran it, at `now`; answers the
 * failure for it once that statement has been killed {@link OUTSIDE_KILLS_LIMIT} times within
 * the window, else undefined (then it is an outside kill like any other). A write or drop is
 * answered by its record first all the same (`answerAfterDeath`): committed, it answers ok.
 * In this process's memory only: see {@link rememberedKill} for a worker's.
 */
export function killedAgain(req: ExecRequest, now = Date.now()): Failure | undefined {
  const digest = digestOf(req);
  return digest === undefined ? undefined : againFailure(req, countInMemory(digest, now));
}

/**
 * {@link killedAgain}, remembered in `counts` (Redis) as well: `item`, the request whose child
 * was SIGKILLed from outside, answered `died` (its outside kill) waits for the kill's note there
 * and answers the statement's own failure when either count reaches {@link OUTSIDE_KILLS_LIMIT};
 * any other answer (a write's record said it committed) goes through as it is. A note that fails
 * (Redis away) counts as none: memory's count stands.
 */
export function rememberedKill(item: Queued, died: Failure, counts: OutsideKillCounts, now = Date.now()): Queued {
  const { req } = item;
  const digest = digestOf(req);
  if (digest === undefined || !('db' in req)) return item;
  const inMemory = countInMemory(digest, now);
  const noted = noteWithin(counts.note(parseDatabaseId(req.db.id).workspace, digest, WINDOW_MS, KEPT_PER_WORKSPACE), NOTE_WAIT_MS);
  return {
    req,
    resolve: (outcome: ExecOutcome) => {
      if (outcome !== died) return item.resolve(outcome);
      void noted.then((n) => item.resolve(againFailure(req, Math.max(n, inMemory)) ?? died));
    },
  };
}

/**
 * How long an answer waits for its kill's note in Redis: a Redis away holds commands until it is
 * back (the worker's connection retries for ever), and the call's answer would wait with them.
 */
const NOTE_WAIT_MS = 2000;

/** `note`'s count, or 0 when it fails or takes longer than `ms`. */
function noteWithin(note: Promise<number>, ms: number): Promise<number> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(0), ms);
    timer.unref();
    note.then(
      (n) => {
        clearTimeout(timer);
        resolve(n);
      },
      () => {
        clearTimeout(timer);
        resolve(0);
      },
    );
  });
}

/** The failure of a statement killed from outside `count` times: its own, from {@link OUTSIDE_KILLS_LIMIT} on. */
function againFailure(req: ExecRequest, count: number): Failure | undefined {
  if (count < OUTSIDE_KILLS_LIMIT) return undefined;
  const what = req.op === 'write' || req.op === 'drop' ? `the ${req.op} (this time before it committed: nothing of it was written)` : 'the statement';
  return failure(
    'RESOURCE_LIMIT',
    `the database process was killed from outside (signal SIGKILL) ${count} times in ${WINDOW_MS / 60_000} minutes during ${what}; ` +
      'taken for its own memory use (the host out of memory while it ran), so it is not run again under this call id: ask for less at once',
  );
}
