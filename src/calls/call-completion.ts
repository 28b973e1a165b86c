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

interface Pending {
  /** The `call.completed` event, or none: metered ahead of its announce (`CallCompletion.meter`). */
  data?: string;
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

  /** Publishes `event` (see `completedEvent`) for `envelope`, metering `meter` when given. */
  complete(envelope: Envelope, event: CompletedEvent, meter?: Metering): Promise<void> {
    return this.queue(envelope.tool, event.json, meter);
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

  private queue(tool: string, data: string | undefined, meter?: Metering): Promise<void> {
    const day = meter ? this.dayOf(meter.at) : '';
    return new Promise((resolve, reject) => {
      this.pending.push({
        ...(data === undefined ? {} : { data }),
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
        settle: (err) => (err ? reject(err) : resolve()),
      });
      // Sent once the calls finishing in this same turn have joined: a microtask, so a lone
      // completion still goes out before BullMQ's own completion of the job.
      if (this.pending.length === 1) queueMicrotask(() => this.flush());
    });
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
    socket?.cork();
    try {
      this.send();
    } finally {
      if (socket && batched) setImmediate(() => socket.uncork());
      else socket?.uncork();
    }
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
