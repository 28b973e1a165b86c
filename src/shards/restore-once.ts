import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';

/**
 * How long a submitted restore form is remembered: a person going back to the page and
 * submitting it again within this answers the first restore's outcome.
 */
export const RESTORE_ONCE_WINDOW_S = 3600;

/** How long a second submission waits for the first one, still running, before it answers "still running". */
const WAIT_MS = 120_000;
const POLL_MS = 150;

type Held = { state: 'running' } | { state: 'done'; outcome: string };

/** A new token for the restore forms of one page as it is shown (random, 96 bits, URL-safe). */
export function newOnceToken(): string {
  return randomBytes(12).toString('base64url');
}

/**
 * One restore per restore form submitted. A person's double click, a browser resubmitting the
 * POST, or going back and submitting the same form again sent the restore again, and it ran
 * again: a second undo point and a second RESTORE entry where the person meant one (session 32,
 * N8). Every restoring form of a page carries a token made when the page was shown; the same
 * token, sent by the same member with the same fields, runs once: the first submission runs it,
 * every other within {@link RESTORE_ONCE_WINDOW_S} answers its outcome (waiting for it while it
 * runs). A submission that fails (a mistyped confirmation, a refusal) is forgotten, so the same
 * form corrected and sent again runs. The same page shown again has a new token: restoring the
 * same moment again on purpose is a new request.
 */
export class RestoreOnce {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly opts: { windowS?: number; waitMs?: number } = {},
  ) {}

  /**
   * Runs `act` once for this submission and answers its outcome (where the page redirects to).
   * Without a token (a page shown before tokens) it runs `act`, as it always did.
   * @param token the form's one-time token, if it carries one.
   * @param submission who sent it and what it asks (member, action, fields), as one string.
   * @param stillRunning the outcome a second submission answers when the first outlives its wait.
   */
  async run(token: string | undefined, submission: string, act: () => Promise<string>, stillRunning: () => string): Promise<string> {
    if (!token) return act();
    const key = this.keys.restoreOnce(createHash('sha256').update(`${token}\n${submission}`).digest('hex'));
    const windowS = this.opts.windowS ?? RESTORE_ONCE_WINDOW_S;
    const until = Date.now() + (this.opts.waitMs ?? WAIT_MS);
    for (;;) {
      const claimed = await this.redis.set(key, JSON.stringify({ state: 'running' } satisfies Held), 'EX', windowS, 'NX');
      if (claimed === 'OK') {
        let outcome: string;
        try {
          outcome = await act();
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
