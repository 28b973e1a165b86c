import type { Redis } from 'ioredis';
import type { Envelope } from '../contracts/envelope.ts';
import { STREAM_MAX_LEN, type CompletedEvent } from '../redis/events.ts';
import type { Keys } from '../redis/keys.ts';
import { withScripts, type ScriptedRedis } from '../redis/lua-scripts.ts';
import { meterDay } from './usage.ts';
import type { HeldNote } from './workspace-redis-budget.ts';

const DAY_MS = 24 * 3600 * 1000;

/** Completions sent in one script at most, so that no script holds Redis for long. */
const MAX_BATCH = 100;

/** What one completed call meters. */
export interface Metering {
  workspace: string;
  agent: string;
  credits: number;
  at: number;
  /**
   * The call's BullMQ job hash, for a call metered once whichever of its job's runs announces
   * it (a write's: `RunOutcome.meterOnce`): complete-calls.lua marks the job and meters only a
   * first mark.
   */
  once?: string;
}

/** Where the budget notes that must reach Redis before a batch of completions come from (`WorkspaceRedisBudget`). */
export interface NotesBefore {
  /** Sends every held note but one workspace's, and hands that one over to go with the batch. */
  takeSoon(): HeldNote | undefined;
}

/**
 * A lone completion held to go in the script that completes its job in BullMQ (`FINISH_WITH_LUA`):
 * its keys and arguments, whether a budget note leads them, and what reads the script's answer.
 */
export interface Rider {
  noted: boolean;
  keys: string[];
  args: (string | number)[];
  /** Reads the completion's part of the script's answer. */
  settle(answer: unknown): void;
  fail(err: Error): void;
}

interface Pending {
  /** The `call.completed` event, or none: metered ahead of its announce (`CallCompletion.meter`). */
  data?: string;
  /** The BullMQ job whose completion it may go with (see {@link CallCompletion.takeRider}). */
  job?: string;
  /** Where the call is metered, and the job whose first mark it waits for (`Metering.once`). */
  meter?: { usageKey: string; field: string; credits: number; member: string; once?: string };
  settle: (err?: Error) => void;
}

/**
 * complete-calls.lua's keys and arguments for `batch`: its events, its metering summed per usage
 * field, and the jobs whose calls are metered once (each with its group and credits, taken back
 * out of the sum when its job was already marked).
 */
function completeCommand(keys: Keys, batch: readonly Pending[]): { keys: string[]; args: (string | number)[] } {
  // Plain loops into the two arrays (no per-call arrays spread or flattened): it runs on every
  // completion, a lone call's too, between the child's answer and the caller's event (issue 31).
  const groups = new Map<string, { field: string; credits: number; calls: number; member: string; index: number }>();
  const usageKeys: string[] = [];
  const marks: (string | number)[] = [];
  const jobs: string[] = [];
  const events: string[] = [];
  for (const { data, meter } of batch) {
    if (data !== undefined) events.push(data);
    if (!meter) continue;
    const id = `${meter.usageKey}\n${meter.field}`;
    let group = groups.get(id);
    if (group) {
      group.credits += meter.credits;
      group.calls += 1;
    } else {
      group = { field: meter.field, credits: meter.credits, calls: 1, member: meter.member, index: groups.size + 1 };
      groups.set(id, group);
      usageKeys.push(meter.usageKey);
    }
    if (meter.once) {
      jobs.push(meter.once);
      marks.push(group.index, meter.credits);
    }
  }
  const args: (string | number)[] = [STREAM_MAX_LEN, events.length];
  for (const event of events) args.push(event);
  args.push(groups.size);
  for (const g of groups.values()) args.push(g.field, g.credits, g.calls, g.member);
  for (const m of marks) args.push(m);
  const commandKeys = [keys.events, keys.usageIndex];
  for (const k of usageKeys) commandKeys.push(k);
  for (const j of jobs) commandKeys.push(j);
  return { keys: commandKeys, args };
}

/**
 * Announces completed calls on the event stream and meters them. Completions that arrive
 * together — a busy worker finishes many calls in one turn of its event loop, when the executor
 * answers a batch — go out as one command, since each command costs the worker and Redis a
 * system call and a wake-up; a lone completion still leaves at once.
 */
export class CallCompletion {
  private readonly redis: ScriptedRedis;
  private readonly connection: Redis;
  private pending: Pending[] = [];
  /** Lone completions held for their jobs' completion in BullMQ, by job id (see {@link takeRider}). */
  private readonly riders = new Map<string, Rider>();
  /** Whether a worker takes riders: set by {@link carryRiders}; otherwise each completion goes at once. */
  private carried = false;
  /** The UTC day last metered under, and its bounds: formatting a date on every call shows up. */
  private day = { from: 0, to: 0, name: '' };

  constructor(
    redis: Redis,
    private readonly keys: Keys,
    /** The calls' budget notes, which reach Redis before their completions (in the same script). */
    private readonly notes?: NotesBefore,
  ) {
    this.connection = redis;
    this.redis = withScripts(redis);
  }

  /**
   * Publishes `event` (see `completedEvent`) for `envelope`, metering `meter` when given. With
   * `job`, the id of the BullMQ job about to be completed with this envelope, a completion alone
   * in its turn waits to go in the same script as that completion (see {@link takeRider}).
   */
  complete(envelope: Envelope, event: CompletedEvent, meter?: Metering, job?: string): Promise<void> {
    return this.queue(envelope.tool, event.json, meter, job);
  }

  /**
   * {@link complete} for a caller that only logs a failure: `failed` hears of it, and no promise
   * is made (a worker announces every call this way: a promise and its `catch` a call, issue 31).
   */
  announce(envelope: Envelope, event: CompletedEvent, meter: Metering | undefined, job: string | undefined, failed: (err: Error) => void): void {
    this.push(envelope.tool, event.json, meter, job, (err) => {
      if (err) failed(err);
    });
  }

  /**
   * Says that a worker completing jobs on this connection takes each job's rider ({@link takeRider})
   * when it completes the job: until then completions are sent at once.
   */
  carryRiders(): void {
    this.carried = true;
  }

  /**
   * The completion held for job `id`, taken to go in BullMQ's completion of the job, or undefined.
   * A sequential call's completion and its job's went as two scripts back to back (issue 31): each
   * an EVALSHA Redis read and answered apart, and a reply the worker read. One not taken in the
   * turn it was held in (BullMQ completes a job in the microtasks after its processor answers) is
   * sent alone, as before.
   */
  takeRider(id: string): Rider | undefined {
    const rider = this.riders.get(id);
    if (rider) this.riders.delete(id);
    return rider;
  }

  /**
   * Meters a call of `tool` whose announce waits for BullMQ to store its outcome: sent now, ahead
   * of that store on the same connection, so a worker that dies between the store and the
   * announce has metered it all the same (review F2). `meter.once` must name its job: a run whose
   * store then fails (its lock lapsed) has marked the job, and the run that answers meters nothing.
   */
  meter(tool: string, meter: Metering & { once: string }): Promise<void> {
    return this.queue(tool, undefined, meter);
  }

  private queue(tool: string, data: string | undefined, meter?: Metering, job?: string): Promise<void> {
    return new Promise((resolve, reject) => this.push(tool, data, meter, job, (err) => (err ? reject(err) : resolve())));
  }

  private push(tool: string, data: string | undefined, meter: Metering | undefined, job: string | undefined, settle: (err?: Error) => void): void {
    const day = meter ? this.dayOf(meter.at) : '';
    this.pending.push({
      ...(data === undefined ? {} : { data }),
      ...(job === undefined ? {} : { job }),
      ...(meter
        ? {
            meter: {
              usageKey: this.keys.usage(meter.workspace, day),
              field: `${meter.agent}|${tool}`,
              credits: meter.credits,
              member: `${meter.workspace}|${day}`,
              ...(meter.once ? { once: meter.once } : {}),
            },
          }
        : {}),
      settle,
    });
    // Sent once the calls finishing in this same turn have joined: a microtask, so a lone
    // completion still goes out before BullMQ's own completion of the job.
    if (this.pending.length === 1) queueMicrotask(() => this.flush());
  }

  private flush(): void {
    // The notes and the completions leave in one write: each write to Redis is a system call
    // that wakes it, and on a busy host the writer is often descheduled inside it (issue 31).
    // Only while connected: otherwise ioredis holds the commands in its own queue.
    const socket = this.connection.status === 'ready' ? this.connection.stream : undefined;
    // Several calls finished in this turn (a busy worker, its child answering a batch): BullMQ's
    // completion of each job follows in this same turn, each its own write; held until the
    // turn's I/O is done, they leave with these as one. A lone call's event leaves at once: its
    // caller waits for it, and would wait behind BullMQ's completion in Redis too.
    const batched = this.pending.length > 1;
    const lone = this.pending[0];
    if (!batched && this.carried && lone?.job !== undefined) return this.hold(lone.job);
    socket?.cork();
    try {
      this.send();
    } finally {
      if (socket && batched) setImmediate(() => socket.uncork());
      else socket?.uncork();
    }
  }

  /** Holds the lone pending completion (of job `id`) as a rider for its job's completion; sent alone if not taken this turn. */
  private hold(id: string): void {
    const batch = this.pending.splice(0);
    const note = this.notes?.takeSoon();
    const { keys, args } = completeCommand(this.keys, batch);
    const settleAll = (err?: Error) => {
      for (const p of batch) p.settle(err);
    };
    const rider: Rider = {
      noted: note !== undefined,
      keys: note ? [...note.keys, ...keys] : keys,
      args: note ? [note.keys.length, note.args.length, ...note.args, ...args] : args,
      settle: (answer) => {
        if (note) {
          const [, held, err] = answer as [number, string, string];
          note.settle(err ? new Error(err) : Number(held));
        }
        settleAll();
      },
      fail: (err) => {
        note?.settle(err);
        settleAll(err);
      },
    };
    this.riders.set(id, rider);
    // Looked at once this turn's microtasks, BullMQ's completion of the job among them, have run (a
    // tick queued from a microtask runs after the last of them): an Immediate and the check phase's
    // entry into JS every sequential call were all `setImmediate` added (issue 31).
    process.nextTick(() => {
      if (this.riders.get(id) !== rider) return;
      this.riders.delete(id);
      const sent = rider.noted
        ? this.redis.agentdbNotedComplete(rider.keys.length, ...rider.keys, ...rider.args)
        : this.redis.agentdbComplete(rider.keys.length, ...rider.keys, ...rider.args);
      sent.then(rider.settle, rider.fail);
    });
  }

  private send(): void {
    // One workspace's notes go in the first batch's script, ahead of its completions: the one
    // workspace of a sequential caller's calls, one script per call where there were two.
    let note = this.notes?.takeSoon();
    while (this.pending.length) {
      const batch = this.pending.splice(0, MAX_BATCH);
      const { keys, args } = completeCommand(this.keys, batch);
      const noted = note;
      note = undefined;
      const fail = (err: Error) => {
        noted?.settle(err);
        for (const p of batch) p.settle(err);
      };
      try {
        // complete-calls.lua: one XADD per completion, and the usage counters of the metered ones.
        const sent = noted
          ? this.redis
              .agentdbNotedComplete(noted.keys.length + keys.length, ...noted.keys, ...keys, noted.keys.length, noted.args.length, ...noted.args, ...args)
              .then(([, held, err]) => noted.settle(err ? new Error(err) : Number(held)))
          : this.redis.agentdbComplete(keys.length, ...keys, ...args);
        sent.then(() => {
          for (const p of batch) p.settle();
        }, fail);
      } catch (err) {
        fail(err as Error);
      }
    }
  }

  private dayOf(at: number): string {
    if (at < this.day.from || at >= this.day.to) {
      const from = Math.floor(at / DAY_MS) * DAY_MS;
      this.day = { from, to: from + DAY_MS, name: meterDay(at) };
    }
    return this.day.name;
  }
}
