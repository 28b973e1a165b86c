import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';
import type { HistoryCaller, HistoryClient } from './history-client.ts';

/**
 * How long a submitted restore form is remembered: a person going back to the page and
 * submitting it again within this answers the first restore's outcome.
 */
export const RESTORE_ONCE_WINDOW_S = 3600;

/** How long a second submission waits for the first one, still running, before it answers "still running". */
const WAIT_MS = 120_000;
const POLL_MS = 150;

type Held = { state: 'running' } | { state: 'done'; outcome: string };

/**
 * Database `db`'s state as {@link RestoreOnce.run} compares it: each generation of its history
 * with its count of commits, which any commit (a write, a restore) and any new snapshot change.
 */
export function historyState(history: Pick<HistoryClient, 'history'>, db: string, caller: HistoryCaller): () => Promise<string> {
  return async () => JSON.stringify((await history.history(db, caller, { commits: 'none' })).generations.map((g) => [g.id, g.commits]));
}

/** A new token for the restore forms of one page as it is shown (random, 96 bits, URL-safe). */
export function newOnceToken(): string {
  return randomBytes(12).toString('base64url');
}

/**
 * One restore per restore form submitted. A person's double click, a browser resubmitting the
 * POST, or going back and submitting the same form again sent the restore again, and it ran
 * again: a second undo point and a second RESTORE entry where the person meant one (session 32,
 * N8). Two keys tell a submission seen before:
 * - the form's one-time token, made when the page was shown: the same token, sent by the same
 *   member with the same fields, runs once; every other within {@link RESTORE_ONCE_WINDOW_S}
 *   answers its outcome, waiting for it while it runs (a double click, a resent POST);
 * - the request itself (member, action, fields) and the database's state after it ran
 *   (`state`: its history's commits): the same request from the page shown again (back, then
 *   submit: the page is not cached, so it has a new token) answers the first outcome while
 *   nothing was committed since. Once something was, the same request is a new restore: it
 *   would now take that away too, which is what the person asks for.
 * A submission that fails (a mistyped confirmation, a refusal) is forgotten, so the same form
 * corrected and sent again runs.
 */
export class RestoreOnce {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly opts: { windowS?: number; waitMs?: number } = {},
  ) {}

  /**
   * Runs `act` once for this submission and answers its outcome (where the page redirects to).
   * @param token the form's one-time token (absent on a page shown before tokens: only `state` tells).
   * @param submission who sent it and what it asks (member, action, fields), as one string.
   * @param act the restore; answers where the page goes next.
   * @param stillRunning the outcome a second submission answers when the first outlives its wait.
   * @param state the database's state as a string (its history's commits), read before and after a restore.
   */
  async run(
    token: string | undefined,
    submission: string,
    act: () => Promise<string>,
    stillRunning: () => string,
    state: () => Promise<string>,
  ): Promise<string> {
    const windowS = this.opts.windowS ?? RESTORE_ONCE_WINDOW_S;
    const hash = (text: string) => createHash('sha256').update(text).digest('hex');
    const same = this.keys.restoreOnce(hash(`request\n${submission}`));
    const done = async (): Promise<string> => {
      const outcome = await act();
      // What the page shown again would send asks for this state: remembered with it.
      const after = await state().catch(() => undefined);
      if (after !== undefined) await this.redis.set(same, JSON.stringify({ outcome, state: after }), 'EX', windowS);
      return outcome;
    };
    const ranAlready = async (): Promise<string | undefined> => {
      const held = await this.redis.get(same);
      if (held === null) return undefined;
      const seen = JSON.parse(held) as { outcome: string; state: string };
      const now = await state().catch(() => undefined);
      return now === seen.state ? seen.outcome : undefined;
    };
    if (!token) return (await ranAlready()) ?? done();
    const key = this.keys.restoreOnce(hash(`${token}\n${submission}`));
    const until = Date.now() + (this.opts.waitMs ?? WAIT_MS);
    for (;;) {
      const claimed = await this.redis.set(key, JSON.stringify({ state: 'running' } satisfies Held), 'EX', windowS, 'NX');
      if (claimed === 'OK') {
        let outcome: string;
        try {
          outcome = (await ranAlready()) ?? (await done());
        } catch (err) {
          await this.redis.del(key);
          throw err;
        }
        await this.redis.set(key, JSON.stringify({ state: 'done', outcome } satisfies Held), 'EX', windowS);
        return outcome;
      }
      const held = await this.redis.get(key);
      // Gone between the two commands: the first failed (or the window ended); claim it again.
      if (held === null) continue;
      const seen = JSON.parse(held) as Held;
      if (seen.state === 'done') return seen.outcome;
      if (Date.now() >= until) return stillRunning();
      // The first submission is still restoring (a restore takes from milliseconds to minutes):
      // no event is published for it, so ask again shortly.
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }
}
