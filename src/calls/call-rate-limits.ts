import type { RateLimitSettings } from '../config.ts';
import { errorEnvelope, type Envelope } from '../contracts/envelope.ts';
import type { Plan } from '../contracts/settings.ts';
import { planCallRates } from '../policy/plan-limits.ts';
import type { Keys } from '../redis/keys.ts';

/** Who a call is counted against: its workspace, and its key (or a keyless runtime's agent). */
export interface RateSubject {
  plan: Plan;
  workspace: string;
  /** The key id the call was made with, if any. */
  keyId?: string;
  /** The caller the call is keyed under: an agent's slug, or `@<member>`. */
  agent: string;
}

/**
 * What a lookup of a call (`GET /v1/calls/:id`, `agentdb result`, `client.result`) costs against
 * the rate limits, in tenths of a call: a tenth. A lookup costs Redis 1 to 3 round trips where a
 * call costs about 20, but uncounted, one workspace polling in a loop took 17 commands a lookup
 * and another workspace's p99 went from 113 to 500 ms (issue 27).
 */
export const LOOKUP_POINTS = 1;

/** What a call costs against the rate limits: a budget of N calls is 10·N points. */
export const CALL_POINTS = 10;

/**
 * What a page of a database's activity costs beyond its lookup, in points: a call per 10,000
 * commits and activity rows it read afresh (a first page reads the whole retained history, a
 * page of a kept one what changed since: issue 29). Pages that read under 1,000 cost nothing more.
 */
export function activityReadPoints(read: number): number {
  return Math.floor((read * CALL_POINTS) / 10_000);
}

/**
 * What a page of a workspace's approvals (the inbox) costs beyond its lookup, in points: a call per
 * 1,000 entries of the workspace's index it read. A page reads every entry's small fields to
 * filter, count and offer its choices: 148 ms of Redis's CPU a page at 60,000 decided approvals
 * (what pro's Redis budget holds), so 7 reloads a second of one member's inbox took Redis's one
 * thread from every other workspace (session 30, T7). Pages of a few hundred cost nothing more.
 */
export function approvalPagePoints(read: number): number {
  return Math.floor((read * CALL_POINTS) / 1_000);
}

/**
 * MCP task follow-ups (`tasks/get`, `tasks/result`, `tasks/cancel`) a principal may make per
 * minute, in a bucket of their own: a client polling at the tasks' `pollInterval` (1 s) follows
 * ten tasks at once within it. Each costs Redis two to three reads; uncounted, one client asking
 * in a loop cost Redis about as much as a full call rate without spending any of it (session 30,
 * T7). Not the lookups' bucket: spent by others' lookups, a waiting task could not be followed
 * (a waiting task stays working while others spend the lookup rate limit, mcp-approval-wait).
 */
export const TASK_POLLS_PER_MINUTE = 600;

/**
 * MCP requests that run no call (`initialize`, `ping`, `tools/list`, notifications, and any other
 * method but `tools/call` and the served `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/list`) a principal may send per minute, in a bucket of its own.
 * A client sends a handful as it connects (initialize, its notification, tools/list) and a ping
 * now and then; uncounted, one key sent 233 `tools/list` a second (1.4 ms of the server's CPU
 * each, a core) or 1,049 pings, charged to nobody (session 32, T9). Not the calls' buckets: a
 * client reconnecting must not spend its workspace's calls, and a key spinning these spends only
 * its own.
 */
export const MCP_REQUESTS_PER_MINUTE = 120;

/**
 * Which budget a refusal spent: a call rate's, a principal's task follow-ups
 * ({@link TASK_POLLS_PER_MINUTE}) or its MCP requests that run no call ({@link MCP_REQUESTS_PER_MINUTE}).
 */
export type RateBudget = 'workspace' | 'key' | 'task-polls' | 'mcp-requests';

/** The budgets of a principal's own, counted apart from its calls: one point a request, limits in requests. */
export type OwnBudget = 'task-polls' | 'mcp-requests';

/**
 * What a download of an offloaded result (`GET /v1/results/:id`) costs against the rate limits, in
 * points, by the bytes it sends: a lookup, and a call per MiB. In flight a download holds only its
 * stream's buffers (its client's reading paces it: 8 held unread, of 16 or 256 MB each, added 4-5 MB
 * to the HTTP process, bench/download-rss.ts), but bounded in number only, one key pulled 4 of the
 * largest results again and again, the blob store's and the process's bandwidth for nothing
 * (session 30, T7). 0 bytes: the lookup before the store is asked (an unknown id costs a read of it).
 */
export function downloadPoints(bytes: number): number {
  return bytes === 0 ? LOOKUP_POINTS : Math.floor((bytes * CALL_POINTS) / (1024 * 1024));
}

/**
 * What a restore (in place, an undo, or into a new database) costs against the rate limits before
 * it runs, in points: 50 calls. It copies its moment out of history into a database file and keeps
 * an undo point, work of a shard's worker and an executor child: 133 ms of one shard for a 20 KB
 * database in T11's loop (7.5 restores a second), against ~1 ms for a call. Uncharged, one admin
 * looping restores of 4 databases doubled another workspace's PK read on the same shard (p50 1.0
 * to 2.1 ms, session 33, T11). At pro's 1,200 calls a minute a workspace restores 24 times a
 * minute at most, a member's key 12. A dry run: {@link RESTORE_DRY_RUN_POINTS}.
 */
export const RESTORE_POINTS = 50 * CALL_POINTS;

/**
 * What a dry run of a restore costs before it runs, in points: 15 calls, about a third of a
 * restore, as it holds the shard about a third as long (it plans the restore in the child, reading
 * the snapshot and the frames, and writes nothing): the same loop of 4 databases ran 21.6 dry runs
 * a second against 7.9 restores (session 34, T12, `bench/restore-loop.ts`). Charged a tenth, as
 * the page of activity it shows, a member's dry-run loop ran 26-41 a second unrefused and took
 * another workspace's PK read on the shard from 2.5 to 11-12 ms (p50). Beyond it, the activity
 * page it shows is charged as any such page (`activityReadPoints`).
 */
export const RESTORE_DRY_RUN_POINTS = 15 * CALL_POINTS;

/**
 * What a restore costs once it ran, beyond {@link RESTORE_POINTS}, by the bytes of the moment it
 * restored (`restoredBytes`, the file it wrote): a call per MiB, as a download is charged, so one
 * restore of a 1 GB database spends about a window of pro's budget (its copy is seconds of a
 * shard's disk).
 */
export function restoredPoints(bytes: number): number {
  return Math.floor((bytes * CALL_POINTS) / (1024 * 1024));
}

/** A refusal: which budget was spent, what it is, and the seconds until its window ends. */
export interface RateRefusal {
  of: RateBudget;
  /** The budget, in calls (a lookup counts {@link LOOKUP_POINTS}/{@link CALL_POINTS} of one); for an {@link OwnBudget}, in requests. */
  calls: number;
  windowS: number;
  retryAfterS: number;
}

/** The plans' rates at the default window: `RATE_LIMITS=plan`, `RATE_LIMIT_WINDOW_S=60`. */
export const DEFAULT_RATE_LIMITS: RateLimitSettings = Object.freeze({ windowS: 60 });

/** One rate counter a call spends: its Redis key, what the call costs it, the most its window holds (points) and the window (s). */
export interface RateCounter {
  of: RateBudget;
  key: string;
  points: number;
  limit: number;
  windowS: number;
}

/** Counters remembered as spent for their window, at most (forgotten all at once past it). */
const MAX_BLOCKED = 10_000;

/**
 * The call-rate rule: each workspace and each key may start so many calls per window, by plan
 * (src/policy/plan-limits.ts). Counted in Redis, one counter per workspace and one per key under
 * the deployment's prefix, so every process that accepts calls shares them and no tenant's count
 * is another's. The key's counter is asked first and alone: a key refused for its own budget
 * spends nothing of its workspace's, so one runaway key leaves its workspace's other callers
 * their share.
 *
 * The counting is `budget-note.lua`'s, not rate-limiter-flexible's (which counted them before,
 * with the same fixed windows): a call's two counters and its Redis budget are then one script
 * and one round trip, where the library made them three, one after another, before every call.
 */
export class CallRateLimits {
  /** Counters Redis refused, until their window ends (ms): a caller that keeps hammering costs Redis nothing more. */
  private readonly blocked = new Map<string, number>();

  constructor(
    private readonly keys: Keys,
    private readonly settings: RateLimitSettings,
  ) {}

  /**
   * The counters one call ({@link CALL_POINTS}) or lookup ({@link LOOKUP_POINTS}) of `s` spends,
   * its key's first, for `budget-note.lua` to count; or the refusal when one of them is known to
   * be spent for the rest of its window.
   */
  counters(s: RateSubject, points: number, now = Date.now()): RateCounter[] | RateRefusal {
    const subject = s.keyId !== undefined ? `k:${s.workspace}:${s.keyId}` : `a:${s.workspace}:${s.agent}`;
    const counters = [this.counter(s, 'key', subject, points), this.counter(s, 'workspace', undefined, points)];
    for (const c of counters) {
      const until = this.blocked.get(c.key);
      if (until === undefined) continue;
      if (until > now) return this.refusal(c, until - now);
      this.blocked.delete(c.key);
    }
    return counters;
  }

  /**
   * The refusal of a call ({@link CALL_POINTS}) of `s` by a counter known spent for the rest of its
   * window, found without Redis; undefined when it may be allowed, or the workspace's plan (which
   * sets the limits) is not known yet.
   */
  knownSpent(s: Omit<RateSubject, 'plan'>, plan: Plan | undefined, now = Date.now()): RateRefusal | undefined {
    if (plan === undefined) return undefined;
    const c = this.counters({ ...s, plan }, CALL_POINTS, now);
    return Array.isArray(c) ? undefined : c;
  }

  /**
   * The counter one request of `s` spends in budget `of`, its principal's own (key, or agent, or
   * member), apart from its call rates: an MCP task follow-up, or an MCP request that runs no call;
   * or the refusal while it is known spent. Its limit is in requests, each one point.
   */
  ownCounter(s: RateSubject, of: OwnBudget, now = Date.now()): RateCounter[] | RateRefusal {
    const subject = s.keyId !== undefined ? `k:${s.workspace}:${s.keyId}` : `a:${s.workspace}:${s.agent}`;
    const { windowS } = this.settings;
    const [set, perMinute] = of === 'task-polls' ? [this.settings.taskPolls, TASK_POLLS_PER_MINUTE] : [this.settings.mcpRequests, MCP_REQUESTS_PER_MINUTE];
    const limit = set ?? Math.max(1, Math.round((perMinute * windowS) / 60));
    const c: RateCounter = { of, key: this.keys.callRate(s.workspace, 'key', windowS, `${of}:${subject}`), points: 1, limit, windowS };
    const until = this.blocked.get(c.key);
    if (until !== undefined && until > now) return this.refusal(c, until - now);
    if (until !== undefined) this.blocked.delete(c.key);
    return [c];
  }

  /** The refusal of a call by counter `c`, spent with `msLeft` of its window to go (remembered until then). */
  refused(c: RateCounter, msLeft: number, now = Date.now()): RateRefusal {
    if (this.blocked.size >= MAX_BLOCKED) this.blocked.clear();
    this.blocked.set(c.key, now + msLeft);
    return this.refusal(c, msLeft);
  }

  private refusal(c: RateCounter, msLeft: number): RateRefusal {
    return {
      of: c.of,
      calls: c.of === 'task-polls' || c.of === 'mcp-requests' ? c.limit : c.limit / CALL_POINTS,
      windowS: this.settings.windowS,
      retryAfterS: Math.max(1, Math.ceil(msLeft / 1000)),
    };
  }

  private counter(s: RateSubject, of: 'workspace' | 'key', subject: string | undefined, points: number): RateCounter {
    const override = of === 'workspace' ? this.settings.workspaceCalls : this.settings.keyCalls;
    const { windowS } = this.settings;
    const calls = override ?? Math.max(1, Math.round((planCallRates(s.plan)[of] * windowS) / 60));
    const limit = calls * CALL_POINTS;
    // A request worth more than the whole window (a restore under a small RATE_LIMIT_*) takes the
    // whole window rather than being refused for ever.
    return { of, key: this.keys.callRate(s.workspace, of, windowS, subject), points: Math.min(points, limit), limit, windowS };
  }
}

/**
 * What a RATE_LIMITED answer says of refusal `r`, the same on every surface: whose budget was spent
 * (`whose`, "Workspace w", "This key"), its calls per window, what the request counted (`what`) and
 * when to `again` ("ask again", "send it again").
 */
export function rateRefusalDetail(r: RateRefusal, whose: string, what: string, again = 'ask again'): string {
  return `${whose} may make ${r.calls} ${r.calls === 1 ? 'call' : 'calls'} per ${r.windowS} s (${what}); ${again} in ${r.retryAfterS} s.`;
}

/** RATE_LIMITED, naming the budget spent, with the seconds to wait in the error (HTTP's Retry-After). */
export function rateLimited(callId: string, tool: string, workspace: string, r: RateRefusal): Envelope {
  const whose = r.of === 'workspace' ? `Workspace ${workspace}` : 'This key';
  const detail = rateRefusalDetail(r, whose, 'a lookup of a call counts a tenth of one', 'send it again');
  const env = errorEnvelope(callId, tool, 'RATE_LIMITED', detail);
  return { ...env, error: { ...env.error, retryAfter: r.retryAfterS } };
}
