import type { Redis } from 'ioredis';
import type { Plan } from '../contracts/settings.ts';
import type { RateCounter } from './call-rate-limits.ts';
import { PLAN_REDIS_BYTES } from '../policy/plan-limits.ts';
import type { Keys } from '../redis/keys.ts';
import { withScripts, type ScriptedRedis } from '../redis/lua-scripts.ts';
import { AdmittedAddBatch } from './admitted-add-batch.ts';
import type { JobAdd } from './admitted-add.ts';
import type { BudgetEntry } from './call-budget-entry.ts';

/** A budget note taken from {@link WorkspaceRedisBudget.takeSoon}, to be sent inside another script. */
export interface HeldNote {
  /** budget-note.lua's keys and arguments. */
  keys: string[];
  args: string[];
  /** Hands back what the workspace holds once the note ran, or why it failed. */
  settle(held: number | Error): void;
}

/** What a workspace holds, in bytes. */
export interface BudgetHeld {
  held: number;
}

/** How often one process writes a workspace's figure to the index of top workspaces. */
const INDEX_EVERY_MS = 1000;
/** Workspaces whose last index write a process remembers (forgotten all at once past it). */
const INDEXED_MAX = 10_000;
/** How long what a workspace held, as a count here last answered, stands for {@link WorkspaceRedisBudget.likelyFull}. */
const HELD_FRESH_MS = 5000;

/**
 * A workspace's Redis budget (issue 27: one agent took Redis from 3 to 634 MB in 19 s with 300
 * calls of a 1 MB query, and another workspace's INSERT then answered INTERNAL). Bytes are
 * counted where they are written — a call's arguments when the client enqueues it, its envelope
 * when the worker completes it, an approval record when it is parked — each until Redis lets it
 * go (RESULT_TTL_HOURS after the call, or the approval's retention). New calls are refused once
 * the workspace holds its budget: what is under way finishes, so the budget can be passed by at
 * most what the workspace has in flight, each envelope bounded by MAX_RESULT_BYTES.
 *
 * The ledger is a sorted set and a running sum (`budget-note.lua`): each step drops what has
 * gone and adds what is new, in O(log n), however many calls a workspace keeps.
 */
export class WorkspaceRedisBudget {
  private readonly redis: ScriptedRedis;
  /** The admitted adds of a turn, sent in one script (see {@link AdmittedAddBatch}). */
  private readonly adds: AdmittedAddBatch;
  /** Notes waiting for the end of this turn, by workspace (see {@link noteSoon}). */
  private readonly soon = new Map<string, { entries: BudgetEntry[]; onError: ((err: unknown) => void)[] }>();
  /** When this process last wrote each workspace's figure to the index, and whether it was 0. */
  private readonly indexed = new Map<string, { at: number; empty: boolean }>();
  /** What each workspace held when a count in this process last answered, and when (see {@link likelyFull}). */
  private readonly seen = new Map<string, { held: number; at: number }>();

  constructor(
    redis: Redis,
    private readonly keys: Keys,
    /** REDIS_BYTES_PER_WORKSPACE: 0 leaves it to each workspace's plan. */
    private readonly override = 0,
  ) {
    this.redis = withScripts(redis);
    this.adds = new AdmittedAddBatch(redis);
  }

  /** The budget of a workspace on `plan`. */
  capOf(plan: Plan): number {
    return this.override > 0 ? this.override : PLAN_REDIS_BYTES[plan];
  }

  /**
   * {@link note}, sent with the other notes of the same workspace made in this turn of the event
   * loop as one script (a busy worker finishes many calls of a workspace in one turn, each
   * noting its envelope): at the end of the turn, or at {@link flush}, whichever comes first.
   * Failures go to `onError`.
   */
  noteSoon(workspace: string, entries: readonly BudgetEntry[], onError: (err: unknown) => void): void {
    let batch = this.soon.get(workspace);
    if (!batch) this.soon.set(workspace, (batch = { entries: [], onError: [] }));
    batch.entries.push(...entries);
    batch.onError.push(onError);
    if (this.soon.size === 1 && batch.entries.length === entries.length) queueMicrotask(() => this.flush());
  }

  /**
   * Sends the notes {@link noteSoon} holds now, before whatever this connection sends next: a
   * completion is flushed after its call's note, so whoever hears of a call hears of it after
   * the count.
   */
  flush(): void {
    if (this.soon.size === 0) return;
    const now = Date.now();
    for (const [workspace, { entries, onError }] of this.soon) {
      this.run(workspace, 0, entries, now).catch((err: unknown) => {
        for (const report of onError) report(err);
      });
    }
    this.soon.clear();
  }

  /** Counts `entries` against `workspace` (and drops what has gone), whatever it holds; answers what it holds then. */
  async note(workspace: string, entries: readonly BudgetEntry[], now = Date.now()): Promise<BudgetHeld> {
    const { held } = await this.run(workspace, 0, entries, now);
    return { held };
  }

  /**
   * Lets a call's own entries go now (a resend of a finished call, a call refused for its id: see
   * `CallEnqueue`), never its id's claim, which the first call under the id holds; never rejects
   * (what is not let go expires at its time).
   */
  async letGo(workspace: string, entries: readonly BudgetEntry[]): Promise<void> {
    const own = entries.filter((e) => e.kind !== 'claim').map((e) => ({ ...e, until: 0 }));
    await this.note(workspace, own).catch(() => undefined);
  }

  /**
   * Counts `entries` (a new call's arguments) unless `workspace` already holds its budget;
   * answers why it may not enqueue the call then, or undefined when counted. The words name
   * the budget, what it holds and when room comes back.
   */
  async admit(workspace: string, plan: Plan, entries: readonly BudgetEntry[], now = Date.now()): Promise<string | undefined> {
    const verdict = await this.admitCall(workspace, plan, entries, [], now);
    return verdict && 'over' in verdict ? verdict.over : undefined;
  }

  /**
   * Counts a new call against its rate `counters` (see `CallRateLimits.counters`) and then, when
   * none is spent, its `entries` against the workspace's budget, in one script: undefined when
   * both counted; else the counter that refused it (with the ms left of its window), or why the
   * budget did. A call refused by a rate counts nothing against the budget. With `add` (see
   * `jobAdd`), the same script adds the call's job once it is admitted, and only then; the
   * adds of one turn leave in one script ({@link AdmittedAddBatch}).
   */
  async admitCall(
    workspace: string,
    plan: Plan,
    entries: readonly BudgetEntry[],
    counters: readonly RateCounter[],
    now = Date.now(),
    add?: JobAdd,
  ): Promise<Admission | undefined> {
    const cap = this.capOf(plan);
    const { held, freesAt, verdict, rateMsLeft } = await this.run(workspace, cap, entries, now, counters, add);
    if (verdict === 1) return undefined;
    if (verdict > 1) return { rate: counters[verdict - 2]!, msLeft: rateMsLeft };
    const when = freesAt === undefined ? '' : `; room comes back from ${new Date(freesAt).toISOString()}, when its oldest kept call expires`;
    return {
      // When room comes back, for a caller to wait for (the answer's `error.retryAfter`): the
      // budget's refusal passes in minutes or hours, where the disk quota's takes days.
      ...(freesAt !== undefined ? { retryAfterS: Math.max(1, Math.ceil((freesAt - now) / 1000)) } : {}),
      over: `workspace ${workspace} holds ${held} bytes in Redis, its budget (${this.override > 0 ? 'REDIS_BYTES_PER_WORKSPACE' : `plan ${plan}`}: ${cap} bytes) is used up${when}. Calls are kept RESULT_TTL_HOURS after they finish, parked ones until decided and their approval records for APPROVAL_RETENTION_DAYS`,
    };
  }

  /**
   * Whether `workspace` held its budget when a count in this process last answered, a few
   * seconds ago at most: its next call is then refused unless room came back since (the script
   * refuses a call once the workspace holds its cap, whatever the call's size). A caller sends
   * such a call's budget note alone first, not inside the script that adds its job: a call
   * carries up to MAX_CALL_BYTES of arguments, which Redis would receive and parse only to
   * refuse them, call after call, for a tenant already over its budget (review R3). Wrong either
   * way, it costs a round trip, never a verdict: the note alone admits as the script does.
   */
  likelyFull(workspace: string, plan: Plan, now = Date.now()): boolean {
    const seen = this.seen.get(workspace);
    return seen !== undefined && now - seen.at < HELD_FRESH_MS && seen.held >= this.capOf(plan);
  }

  /** Counts a lookup against its rate `counters` alone (in the same slot as the budget): the counter that refused it, or undefined. */
  async countRates(workspace: string, counters: readonly RateCounter[]): Promise<{ rate: RateCounter; msLeft: number } | undefined> {
    const { ledger, held } = this.keys.redisBudget(workspace);
    const [, , verdict, msLeft] = await this.redis.agentdbBudgetNote(
      2 + counters.length,
      ledger,
      held,
      ...counters.map((c) => c.key),
      '0',
      '-1',
      ...rateArgs(counters),
    );
    return verdict > 1 ? { rate: counters[verdict - 2]!, msLeft: Number(msLeft) } : undefined;
  }

  /**
   * The notes {@link noteSoon} holds for one workspace, taken out to be sent inside the script
   * of the completions they precede (`NOTED_COMPLETE_LUA`): budget-note.lua's keys and arguments,
   * and where its reply goes. The other workspaces' notes are sent now, as {@link flush} sends
   * them, so they too reach Redis before those completions. Undefined when none is held.
   */
  takeSoon(): HeldNote | undefined {
    const first = this.soon.entries().next();
    if (first.done) return undefined;
    const [workspace, { entries, onError }] = first.value;
    this.soon.delete(workspace);
    this.flush();
    const now = Date.now();
    const { keys, args } = this.noteCommand(workspace, 0, entries, now);
    return {
      keys,
      args,
      settle: (held) => {
        if (typeof held === 'number') this.index(workspace, held, now);
        else for (const report of onError) report(held);
      },
    };
  }

  /** budget-note.lua's keys and arguments for `entries` of `workspace` (see {@link run}). */
  private noteCommand(
    workspace: string,
    cap: number,
    entries: readonly BudgetEntry[],
    now: number,
    counters: readonly RateCounter[] = [],
  ): { keys: string[]; args: string[] } {
    const { ledger, held } = this.keys.redisBudget(workspace);
    // Plain loops into the two arrays: every completion's note is built here (issue 31).
    const keys = [ledger, held];
    const args = [String(now), String(cap)];
    for (const c of counters) {
      keys.push(c.key);
      args.push(String(c.points), String(c.limit), String(c.windowS));
    }
    for (const e of entries) {
      const bytes = String(Math.ceil(e.bytes));
      args.push(`${e.callKey}|${e.kind}:${bytes}`, bytes, String(Math.ceil(e.until)));
    }
    return { keys, args };
  }

  private async run(
    workspace: string,
    cap: number,
    entries: readonly BudgetEntry[],
    now: number,
    counters: readonly RateCounter[] = [],
    add?: JobAdd,
  ): Promise<BudgetHeld & { verdict: number; rateMsLeft: number; freesAt?: number }> {
    const { keys, args: argv } = this.noteCommand(workspace, cap, entries, now, counters);
    const [sum, first, verdict, rateMsLeft] = add
      ? await this.adds.send({ keys: [...add.keys, ...keys], args: [...add.args, ...argv] })
      : await this.redis.agentdbBudgetNote(keys.length, ...keys, ...argv);
    if (verdict > 1) return { held: 0, verdict, rateMsLeft: Number(rateMsLeft) };
    this.index(workspace, Number(sum), now);
    return { held: Number(sum), verdict, rateMsLeft: 0, ...(first ? { freesAt: Number(first) } : {}) };
  }

  /**
   * The index of what each workspace holds, for /metrics' top workspaces: apart from the script
   * (its key is in no workspace's hash slot), not awaited, and at most once a second per
   * workspace unless it empties or fills again, since a figure a second old does no harm there.
   * Written on every count it was one more command, and one more write to the socket, per call
   * in the client and again in the worker: 3 % of a sequential read's client CPU. The figure is
   * kept here on every count, for {@link likelyFull}.
   */
  private index(workspace: string, held: number, now: number): void {
    if (this.seen.size >= INDEXED_MAX && !this.seen.has(workspace)) this.seen.clear();
    this.seen.set(workspace, { held, at: now });
    const last = this.indexed.get(workspace);
    const empty = held <= 0;
    if (last && last.empty === empty && now - last.at < INDEX_EVERY_MS) return;
    if (this.indexed.size >= INDEXED_MAX) this.indexed.clear();
    this.indexed.set(workspace, { at: now, empty });
    const key = this.keys.redisBudgetIndex;
    (empty ? this.redis.zrem(key, workspace) : this.redis.zadd(key, held, workspace)).catch(() => undefined);
  }

  /**
   * The `n` workspaces holding the most of Redis, as their budgets last counted them (bytes,
   * most first). A workspace whose ledger has gone with its last entry (it stopped calling) is
   * dropped from the index here; one whose older entries went since its last call still counts
   * them until its next.
   */
  async top(n: number): Promise<{ workspace: string; bytes: number }[]> {
    if (n <= 0) return [];
    const index = this.keys.redisBudgetIndex;
    const candidates = await this.redis.zrevrange(index, 0, 2 * n - 1);
    if (candidates.length === 0) return [];
    const held = await this.redis.mget(...candidates.map((ws) => this.keys.redisBudget(ws).held));
    const gone = candidates.filter((_, i) => held[i] === null);
    if (gone.length) await this.redis.zrem(index, ...gone);
    return candidates
      .map((workspace, i) => ({ workspace, bytes: Number(held[i] ?? 0) }))
      .filter((w) => w.bytes > 0)
      .sort((a, b) => b.bytes - a.bytes)
      .slice(0, n);
  }
}

/** Why a call was not admitted: a rate counter spent (and the ms left of its window), or the Redis budget (and the seconds until its oldest entry expires). */
export type Admission = { rate: RateCounter; msLeft: number } | { over: string; retryAfterS?: number };

/** The rate counters' arguments of `budget-note.lua`: points, limit and window per counter. */
function rateArgs(counters: readonly RateCounter[]): string[] {
  return counters.flatMap((c) => [String(c.points), String(c.limit), String(c.windowS)]);
}
