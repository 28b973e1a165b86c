import { createRequire } from 'node:module';
import { Job, Worker, type JobJsonRaw, type Processor, type RedisClient, type WorkerOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Rider } from '../calls/call-completion.ts';
import { FINISH_KEYS, withScripts, type ScriptedRedis } from '../redis/lua-scripts.ts';

/** The BullMQ the worker takes jobs with (package.json pins it): its script is the one this build embeds. */
const bullmqScripts = createRequire(import.meta.url)('bullmq/dist/cjs/scripts/moveToActive-11.js') as {
  moveToActive: { name: string; content: string; keys: number };
};
const MOVE = bullmqScripts.moveToActive;

/**
 * BullMQ's `moveToActive`, and then, when it took a job and no other can be taken (none waits,
 * none is prioritized, no delayed one is due), the removal of the queue's base marker (member
 * "0") that it has just left: BullMQ marks the queue as having work each time it hands a job
 * over, so the worker's next blocking fetch returned at once and asked for a job that was not
 * there (issue 31; was `clear-stale-marker.lua`, a script of its own per call). A fifth element,
 * 1, says the job was the last one; a delayed job then left has its due time (ms) in the fourth,
 * BullMQ's `delayUntil`, which its fetch for nothing would have returned: the worker's blocking
 * wait ends then (a retry's backoff, a call put back), not after `drainDelay`. Same keys and arguments as BullMQ's (KEYS: its 11, the wait
 * list first, prioritized third, delayed seventh, the marker eleventh; ARGV[2] is now, ms).
 */
export const TAKE_JOB_LUA = (): string => `local taken = (function()
${MOVE.content}
end)()
if type(taken[2]) == 'string' and redis.call('LLEN', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[3]) == 0 then
  local first = redis.call('ZRANGE', KEYS[7], 0, 0, 'WITHSCORES')
  -- BullMQ scores a delayed job by its due time (ms) times 0x1000, plus a counter.
  if not first[2] or tonumber(first[2]) / 0x1000 > tonumber(ARGV[2]) then
    redis.call('ZREM', KEYS[11], '0')
    taken[5] = 1
    -- The next one's due time, as BullMQ's empty fetch would have said (its blocking wait ends then).
    if first[2] then taken[4] = math.floor(tonumber(first[2]) / 0x1000) end
  end
end
return taken
`;

/** The `moveToActive` of this BullMQ, as its client's `runCommand` names it (its name, then its key count). */
const MOVE_COMMAND_PREFIX = `${MOVE.name}:`;

/**
 * A job a {@link ShardWorker} made: BullMQ's, with what the worker knows of it beside, on the job
 * itself. They were a WeakMap and a WeakSet keyed by the job: an entry set and looked up in each
 * per call, and an ephemeron the young GC traces per job (issue 31, session 31: ~0.5 % of the
 * worker's CPU at 64 reads in flight, `bench/worker-perf.ts`).
 */
class TakenJob<Data = unknown, Result = unknown, Name extends string = string> extends Job<Data, Result, Name> {
  /** The JSON text its data was read from (see {@link dataJsonOf}); undefined until `createJob` sets it. */
  dataText: string | undefined = undefined;
  /** Taken by the worker's own fetch, which saw to the marker it left (see `ShardWorker.markerChecked`). */
  markerSeen = false;
  /** BullMQ's deferred failure (`defa`: stalled past its limit), taken off for this run to settle it (see {@link stalledOutOf}). */
  stalledOut: string | undefined = undefined;
}

/**
 * The JSON text a job's data was read from, when a {@link ShardWorker} took it: what a caller's
 * `JSON.stringify` of the data wrote, byte for byte, so what its size is measured on without
 * serialising the parsed data again (issue 31). Undefined for a job made elsewhere.
 */
export function dataJsonOf(job: Job): string | undefined {
  return job instanceof TakenJob ? job.dataText : undefined;
}

/**
 * Why BullMQ would have failed `job` unrun (its deferred failure: it stalled past its limit, its
 * workers killed or stopped twice while it ran), when the worker's `replaysStalled` took the job
 * to be run instead, to be settled from what it left: undefined for a job not taken so.
 */
export function stalledOutOf(job: Job): string | undefined {
  return job instanceof TakenJob ? job.stalledOut : undefined;
}

/** Jobs noted as taken at most, far above any worker's concurrency (see `ShardWorker.taken`). */
const MAX_TAKEN = 4096;

/** The command {@link TAKE_JOB_LUA} is defined as on the worker's connection. */
const TAKE_JOB = 'agentdbTakeJob';

/**
 * A shard's BullMQ worker, whose fetch of a job also clears the queue's marker when it takes the
 * last job ({@link TAKE_JOB_LUA}) and then goes straight to its blocking wait. BullMQ's fetch loop
 * asks for another job after each it takes, until one fetch finds none: with nothing left that
 * was a `moveToActive` for nothing per sequential call, and the call waited for its answer
 * before it started (issue 31). A job added meanwhile adds its own marker, which wakes that wait
 * at once, as it would have found the job.
 */
export class ShardWorker<Data = unknown, Result = unknown> extends Worker<Data, Result> {
  /**
   * Jobs {@link TAKE_JOB_LUA} has just handed over and not yet returned from `moveToActive`, by
   * id: whether each was the last one. Per job, not per worker: fetches overlap (BullMQ keeps
   * up to its concurrency of them in flight), and their answers can be read in one turn.
   */
  private readonly taken = new Map<string, boolean>();
  /** Which jobs failed for stalling are run to be settled (see the constructor's `replaysStalled`). */
  private readonly replaysStalled: ((job: Job<Data, Result>) => boolean) | undefined;
  /** BullMQ's client wrapped by {@link takingClient}, and the client it wraps. */
  private taking: { client: RedisClient; wrapped: RedisClient } | undefined;
  /** Reads {@link TAKE_JOB_LUA}'s answer: notes the job it took, and gives BullMQ its own four elements. */
  private readonly noteTaken = (answer: unknown[]): unknown[] => {
    if (typeof answer[1] !== 'string' || !answer[0]) return answer;
    // Bounded: a fetch that failed past its answer leaves its entry. Forgetting one is safe (the
    // job's marker is then checked by `StaleMarkers`, and the worker fetches once more).
    if (this.taken.size >= MAX_TAKEN) this.taken.clear();
    this.taken.set(answer[1], answer[4] === 1);
    return answer;
  };

  constructor(
    name: string,
    processor: Processor<Data, Result>,
    opts: WorkerOptions & {
      connection: Redis;
      /** A job's announce held to go with its completion (`CallJobProcessor.riderFor`), taken when BullMQ completes it. */
      riderFor?: (id: string) => Rider | undefined;
      /**
       * Whether a job BullMQ failed unrun for stalling past its limit is given to the processor
       * instead, its reason on the job ({@link stalledOutOf}): a write the run before committed
       * is answered from its record (session 35, F14). Without it, or false, BullMQ fails it.
       */
      replaysStalled?: (job: Job<Data, Result>) => boolean;
    },
  ) {
    super(name, processor, opts);
    this.replaysStalled = opts.replaysStalled;
    const redis = opts.connection;
    if (typeof (redis as unknown as Record<string, unknown>)[TAKE_JOB] !== 'function') {
      redis.defineCommand(TAKE_JOB, { lua: TAKE_JOB_LUA(), numberOfKeys: MOVE.keys });
    }
    if (opts.riderFor) this.finishWithRiders(withScripts(redis), opts.riderFor);
  }

  /**
   * BullMQ's `moveToFinished` of a job whose announce is held for it (a lone call's: see
   * `CallCompletion.takeRider`) runs as `FINISH_WITH_LUA`, the announce first, in one script: BullMQ
   * builds its keys and arguments and reads its part of the answer as always (issue 31).
   */
  private finishWithRiders(redis: ScriptedRedis, riderFor: (id: string) => Rider | undefined): void {
    const scripts = (this as unknown as { scripts: { execCommand(client: RedisClient, name: string, args: unknown[]): Promise<unknown> } }).scripts;
    const exec = scripts.execCommand.bind(scripts);
    scripts.execCommand = (client, command, args) => {
      // BullMQ's arguments: its 14 keys, then the job's id first.
      const rider = command === 'moveToFinished' ? riderFor(String(args[FINISH_KEYS])) : undefined;
      if (!rider) return exec(client, command, args);
      const keys = args.slice(0, FINISH_KEYS);
      const finished = redis
        .agentdbFinishWith(
          rider.keys.length + FINISH_KEYS,
          ...rider.keys,
          ...keys,
          rider.keys.length,
          rider.args.length,
          rider.noted ? '1' : '0',
          ...rider.args,
          ...args.slice(FINISH_KEYS),
        )
        .then(
          ([rodeOk, rode, doneOk, done]) => {
            // Each part's failure is its own, as when they were two scripts.
            if (rodeOk === 1) rider.settle(rode);
            else rider.fail(new Error(String(rode)));
            if (doneOk !== 1) throw new Error(String(done));
            return done;
          },
          (err: Error) => {
            rider.fail(err);
            throw err;
          },
        );
      return finished;
    };
  }

  /** The class of the jobs it makes: BullMQ's, with the worker's notes on them (see {@link TakenJob}). */
  protected override get Job(): typeof Job {
    return TakenJob;
  }

  /** BullMQ's job, its data's text kept on it (see {@link dataJsonOf}). */
  protected override createJob(data: JobJsonRaw, jobId: string): Job<Data, Result> {
    const job = super.createJob(data, jobId);
    if (typeof data.data === 'string' && job instanceof TakenJob) job.dataText = data.data;
    return job;
  }

  /**
   * BullMQ's run of a job, except that a job it would fail unrun for stalling past its limit is
   * run when `replaysStalled` says so, its reason moved to {@link stalledOutOf}: the processor
   * then answers only what the run before left (or fails it with that reason, as BullMQ would).
   */
  override processJob(job: Job<Data, Result>, token: string, fetchNextCallback?: () => boolean) {
    if (job.deferredFailure && job instanceof TakenJob && this.replaysStalled?.(job)) {
      job.stalledOut = job.deferredFailure;
      job.deferredFailure = '';
    }
    return super.processJob(job, token, fetchNextCallback);
  }

  /** Whether `job` was taken by this worker's own fetch, which saw to the marker it left. */
  markerChecked(job: Job): boolean {
    return job instanceof TakenJob && job.markerSeen;
  }

  /**
   * BullMQ's client in all but the one command (what else BullMQ reads of it is the client's),
   * made once per client rather than per fetch (issue 31: a wrapper and two closures a call).
   */
  private takingClient(client: RedisClient): RedisClient {
    if (this.taking?.client === client) return this.taking.wrapped;
    const wrapped = Object.create(client, {
      runCommand: {
        value: (command: string, args: (string | number | Buffer)[]) => {
          if (!command.startsWith(MOVE_COMMAND_PREFIX)) return client.runCommand(command, args);
          // BullMQ reads the first four elements (raw2NextJobData); the fifth is ours.
          return client.runCommand(TAKE_JOB, args).then(this.noteTaken);
        },
      },
    }) as RedisClient;
    this.taking = { client, wrapped };
    return wrapped;
  }

  /**
   * BullMQ's `moveToActive`, its script run as {@link TAKE_JOB_LUA}: BullMQ builds the keys and
   * arguments and reads the answer as always; a job that was the last one marks the worker
   * drained, as the fetch for nothing that BullMQ would send next does.
   */
  protected override async moveToActive(client: RedisClient, token: string, name?: string): Promise<Job<Data, Result>> {
    const job = await super.moveToActive(this.takingClient(client), token, name);
    if (!job?.id) return job;
    const last = this.taken.get(job.id);
    // Only when the script ran: a BullMQ that took the job another way left its marker as it was.
    if (last === undefined) return job;
    this.taken.delete(job.id);
    if (job instanceof TakenJob) job.markerSeen = true;
    const self = this as unknown as { drained?: boolean };
    if (last && typeof self.drained === 'boolean') self.drained = true;
    return job;
  }
}
