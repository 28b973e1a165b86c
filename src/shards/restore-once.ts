import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { BudgetEntry } from '../calls/call-budget-entry.ts';
import type { WorkspaceRedisBudget } from '../calls/workspace-redis-budget.ts';
import type { Plan } from '../contracts/settings.ts';
import { AgentDbError } from '../errors.ts';
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
 * What one submission may keep in Redis, counted against its workspace's budget for the window:
 * its token's record and the request's (a web form's: 312 and 248 bytes by MEMORY USAGE; /v1's
 * hold the restore's JSON answer; the database's state kept as its sha256), with room to spare. Uncounted,
 * a member sending restores under new keys grew them for an hour each, outside any budget.
 */
export const RESTORE_ONCE_BYTES = 2048;

/** The workspaces' Redis budgets, and the plan each is on, for {@link RestoreOnce}'s records. */
export interface RestoreOnceBudget {
  budget: WorkspaceRedisBudget;
  planOf(workspace: string): Promise<Plan>;
}

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
    private readonly opts: { windowS?: number; waitMs?: number; budget?: RestoreOnceBudget } = {},
  ) {}

  /**
   * Counts a submission's records against `workspace`'s Redis budget for the window, or throws
   * the budget's QUOTA_EXCEEDED (with its `retryAfter`) when the workspace holds it: nothing was
   * restored. Answers the entry, to let go of should the submission be forgotten.
   */
  private async admit(workspace: string, record: string, windowS: number): Promise<BudgetEntry | undefined> {
    const charge = this.opts.budget;
    if (!charge) return undefined;
    const now = Date.now();
    const entry: BudgetEntry = { callKey: `restore-once:${record}`, kind: 'restore', bytes: RESTORE_ONCE_BYTES, until: now + windowS * 1000 + 60_000 };
    const refused = await charge.budget.admitCall(workspace, await charge.planOf(workspace), [entry], [], now);
    if (refused && 'over' in refused) {
      throw new AgentDbError(
        'QUOTA_EXCEEDED',
        `${refused.over}; nothing was restored`,
        refused.retryAfterS !== undefined ? { retryAfter: refused.retryAfterS } : {},
      );
    }
    return entry;
  }

  private async forget(workspace: string, entry: BudgetEntry | undefined): Promise<void> {
    if (entry) await this.opts.budget?.budget.letGo(workspace, [entry]);
  }

  /**
   * Runs `act` once for this submission and answers its outcome (where the page redirects to).
   * @param workspace whose Redis budget the submission's records count against.
   * @param token the form's one-time token (absent on a page shown before tokens: only `state` tells).
   * @param submission who sent it and what it asks (member, action, fields), as one string.
   * @param act the restore; answers where the page goes next.
   * @param stillRunning the outcome a second submission answers when the first outlives its wait.
   * @param state the database's state as a string (its history's commits), read before and after a restore;
   *   absent, only the token tells a submission seen before (an API's idempotency key: a new key is a new restore).
   */
  async run(
    workspace: string,
    token: string | undefined,
    submission: string,
    act: () => Promise<string>,
    stillRunning: () => string,
    state?: () => Promise<string>,
  ): Promise<string> {
    const windowS = this.opts.windowS ?? RESTORE_ONCE_WINDOW_S;
    const hash = (text: string) => createHash('sha256').update(text).digest('hex');
    const same = this.keys.restoreOnce(hash(`request\n${submission}`));
    const done = async (): Promise<string> => {
      const outcome = await act();
      if (!state) return outcome;
      // What the page shown again would send asks for this state: remembered with it.
      // Kept as its hash: a database's state lists each generation of its history, and grows with them.
      const after = await state().catch(() => undefined);
      if (after !== undefined) await this.redis.set(same, JSON.stringify({ outcome, state: hash(after) }), 'EX', windowS);
      return outcome;
    };
    const ranAlready = async (): Promise<string | undefined> => {
      if (!state) return undefined;
      const held = await this.redis.get(same);
      if (held === null) return undefined;
      const seen = JSON.parse(held) as { outcome: string; state: string };
      const now = await state().catch(() => undefined);
      // A record from before session 33 holds the state itself.
      return now !== undefined && (hash(now) === seen.state || now === seen.state) ? seen.outcome : undefined;
    };
    if (!token) {
      const seen = await ranAlready();
      if (seen !== undefined) return seen;
      const entry = await this.admit(workspace, same, windowS);
      try {
        return await done();
      } catch (err) {
        await this.forget(workspace, entry);
        throw err;
      }
    }
    const key = this.keys.restoreOnce(hash(`${token}\n${submission}`));
    const until = Date.now() + (this.opts.waitMs ?? WAIT_MS);
    for (;;) {
      const claimed = await this.redis.set(key, JSON.stringify({ state: 'running' } satisfies Held), 'EX', windowS, 'NX');
      if (claimed === 'OK') {
        let outcome: string;
        let entry: BudgetEntry | undefined;
        try {
          entry = await this.admit(workspace, key, windowS);
          outcome = (await ranAlready()) ?? (await done());
        } catch (err) {
          await this.redis.del(key);
          await this.forget(workspace, entry);
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
