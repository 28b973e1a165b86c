import { createRequire } from 'node:module';
import { Backoffs, Job, type JobJson, type JobsOptions, type Queue } from 'bullmq';
import type { CallJobData } from '../contracts/call.ts';

/**
 * BullMQ's add of one job, as the keys and arguments of its `addStandardJob` script: what
 * `Queue.add` would send, built by BullMQ itself, to be sent inside the caller's admission
 * (`ADMITTED_ADDS_LUA`) instead of after it.
 */
export interface JobAdd {
  keys: string[];
  /** BullMQ's three: its packed arguments, the data's JSON, its packed options. */
  args: [Buffer | string, string, Buffer | string];
  /** The job data's JSON, as stored: what the Redis budget counts for the call's arguments. */
  dataJson: string;
}

/** The BullMQ the add is built by (package.json pins it): its script is the one this build embeds. */
const bullmqScripts = createRequire(import.meta.url)('bullmq/dist/cjs/scripts/addStandardJob-9.js') as {
  addStandardJob: { name: string; content: string; keys: number };
};
const ADD = bullmqScripts.addStandardJob;
/** How many keys BullMQ's standard add takes, and its script's text (for the admission's script, `ADMITTED_ADDS_LUA`). */
export const ADD_KEYS = ADD.keys;
export const ADD_LUA = ADD.content;

/**
 * Options a job of this add may carry: those BullMQ's standard add encodes as they are. Any other
 * (a delay, a priority, a parent, deduplication, a repeat, a size limit) takes BullMQ's own `Job`.
 */
const PLAIN_OPTIONS = new Set(['jobId', 'attempts', 'backoff', 'removeOnComplete', 'removeOnFail']);

/**
 * The keys and arguments `queue.add(name, data, opts)` would send, built by BullMQ with nothing
 * sent: its `Scripts.addJob` (the packing of the arguments and options, the key names) hands
 * them to its client's `runCommand` in the same turn, which this captures. The job it is given
 * is the JSON a `Job` would make of itself, made here: a `Job` built per call only to be turned
 * into that JSON took half the caller's BullMQ time per read (issue 31: its constructor,
 * `asJSON` serialising its empty result, error and stack, and `validateOptions`). Options other
 * than the plain ones a call's job has still go through a `Job` ({@link jobAddByJob}).
 * @throws Error when BullMQ no longer builds a standard add that way (a version not pinned), or
 * for a job id BullMQ refuses (an integer, or one holding `:`), as `queue.add` does.
 */
export function jobAdd(queue: Queue, name: string, data: CallJobData, opts: JobsOptions & { jobId: string }, now = Date.now()): JobAdd {
  // As Queue.addJob merges them: the queue's defaults under the call's own options; then as the
  // Job's constructor leaves them: attempts 0 unless given, the backoff normalised.
  const merged: JobsOptions = { attempts: 0, ...queue.defaultJobOptions, ...opts };
  for (const option in merged) if (!PLAIN_OPTIONS.has(option)) return jobAddByJob(queue, name, data, opts);
  const { jobId } = opts;
  // Job.validateOptions' checks of an id, the only ones plain options can fail.
  if (`${parseInt(jobId, 10)}` === jobId) throw new Error('Custom Id cannot be integers');
  if (jobId.includes(':') && jobId.split(':').length !== 3) throw new Error('Custom Id cannot contain :');
  if (merged.backoff !== undefined) merged.backoff = Backoffs.normalize(merged.backoff);
  const job = { name, timestamp: now, data: JSON.stringify(data) } as JobJson;
  return captured(jobId, (client) => queue.scripts.addJob(client as never, job, Job.optsAsJSON(merged), jobId, { parentDependenciesKey: '' }));
}

/**
 * {@link jobAdd} by BullMQ's own `Job` (its constructor, `asJSON`, `validateOptions`): for options
 * the plain path does not take, and for a test to hold the two alike.
 */
export function jobAddByJob(queue: Queue, name: string, data: CallJobData, opts: JobsOptions & { jobId: string }): JobAdd {
  // As Queue.addJob merges them: the queue's defaults under the call's own options.
  const job = new Job(queue, name, data, { ...queue.defaultJobOptions, ...opts }, opts.jobId);
  return captured(opts.jobId, (client) => job.addJob(client as never, { parentDependenciesKey: '' }));
}

/** The standard add `send` makes BullMQ send, captured in this turn instead of sent. */
function captured(jobId: string, send: (client: { runCommand: (command: string, list: (Buffer | string)[]) => Promise<string> }) => Promise<unknown>): JobAdd {
  let got: { command: string; list: (Buffer | string)[] } | undefined;
  const capture = {
    runCommand: (command: string, list: (Buffer | string)[]) => {
      got = { command, list };
      return Promise.resolve(jobId);
    },
  };
  // BullMQ's own checks (validateOptions) throw from `send` itself, before any promise.
  void send(capture).catch(() => undefined);
  // Set by the capture above, in this turn (the compiler cannot see it run).
  const add = got as typeof got;
  if (!add?.command.startsWith(`${ADD.name}:`) || add.list.length !== ADD.keys + 3) {
    throw new Error(`BullMQ ${add?.command ?? '(nothing)'} is not the standard add this client embeds (${ADD.name}, ${ADD.keys} keys)`);
  }
  const { list } = add;
  const args = list.slice(ADD.keys) as JobAdd['args'];
  return { keys: list.slice(0, ADD.keys) as string[], args, dataJson: args[1] };
}

/**
 * {@link jobAdd} for one queue, job name and set of options, with what is the same for every job
 * built once: the keys, and BullMQ's packed options but for the job id inside them (issue 31:
 * `Job.optsAsJSON`, the merge, the msgpack of options that never change, BullMQ's async
 * `addJob` only to be captured, a third of `jobAdd`). Per job: the id's checks, the data's JSON
 * and BullMQ's own packing of its arguments (its `addStandardJobArgs`); the options are the
 * template's bytes around the id's msgpack, taken from that packing. Byte for byte what
 * {@link jobAdd} builds (checked once when made; undefined when options are not plain or the
 * check fails, and the caller uses {@link jobAdd}).
 */
export class JobAddTemplate {
  private constructor(
    private readonly queue: Queue,
    private readonly name: string,
    /** The packed options before and after the job id's msgpack. */
    private readonly head: Buffer,
    private readonly tail: Buffer,
    /** Bytes of the packed arguments before the job id: the array's header and the key prefix. */
    private readonly idAt: number,
  ) {}

  /** The template of `queue`'s adds of `name` with `opts` (its `jobId` set per job), or undefined. */
  static of(queue: Queue, name: string, opts: JobsOptions): JobAddTemplate | undefined {
    const merged: JobsOptions = { attempts: 0, ...queue.defaultJobOptions, ...opts };
    for (const option in merged) if (!PLAIN_OPTIONS.has(option) && option !== 'jobId') return undefined;
    try {
      const at0 = Date.now();
      const probe = (jobId: string) => jobAdd(queue, name, {} as CallJobData, { ...opts, jobId }, at0);
      const marker = 'agentdb-template-marker';
      const made = probe(marker);
      const packedArgs = made.args[0] as Buffer;
      const idAt = packedArgs.length > 1 ? 1 + msgpackStrLength(packedArgs, 1) : -1;
      const id = idAt > 0 ? packedArgs.subarray(idAt, idAt + msgpackStrLength(packedArgs, idAt)) : undefined;
      const packedOpts = made.args[2] as Buffer;
      const at = id ? packedOpts.indexOf(id) : -1;
      if (!id || !Buffer.isBuffer(packedOpts) || at < 0 || packedOpts.indexOf(id, at + 1) >= 0) return undefined;
      const template = new JobAddTemplate(queue, name, packedOpts.subarray(0, at), packedOpts.subarray(at + id.length), idAt);
      // Checked against BullMQ's own add, for ids of each msgpack string header.
      for (const jobId of ['a:b:c', 'x'.repeat(40), 'y'.repeat(300)]) {
        const want = probe(jobId);
        const got = template.add({} as CallJobData, jobId, at0);
        if (!sameAdd(want, got)) return undefined;
      }
      return template;
    } catch {
      // Not built the way this template reads it (another BullMQ): `jobAdd` then, which says why.
      return undefined;
    }
  }

  /** The add of the job `jobId` of `data`, enqueued at `now`. @throws Error for an id BullMQ refuses, as {@link jobAdd}. */
  add(data: CallJobData, jobId: string, now = Date.now()): JobAdd {
    if (`${parseInt(jobId, 10)}` === jobId) throw new Error('Custom Id cannot be integers');
    if (jobId.includes(':') && jobId.split(':').length !== 3) throw new Error('Custom Id cannot contain :');
    const { queue } = this;
    const job = { name: this.name, timestamp: now, data: JSON.stringify(data) } as JobJson;
    // As Scripts.addJob builds them for a standard add with no parent.
    const args = [queue.keys[''], jobId, this.name, now, null, null, undefined, undefined, null];
    // Protected in BullMQ's types; `jobAdd`'s capture checks this build's scripts are the ones embedded.
    const scripts = queue.scripts as unknown as { addStandardJobArgs(job: JobJson, opts: Buffer, args: unknown[]): (Buffer | string)[] };
    const list = scripts.addStandardJobArgs(job, EMPTY, args);
    const packedArgs = list[ADD.keys] as Buffer;
    const id = packedArgs.subarray(this.idAt, this.idAt + msgpackStrLength(packedArgs, this.idAt));
    const opts = Buffer.concat([this.head, id, this.tail]);
    return { keys: list.slice(0, ADD.keys) as string[], args: [packedArgs, job.data as string, opts], dataJson: job.data as string };
  }
}

const EMPTY = Buffer.alloc(0);

/** Bytes of the msgpack string at `at` of `b`, its header with it. */
function msgpackStrLength(b: Buffer, at: number): number {
  const h = b[at]!;
  if ((h & 0xe0) === 0xa0) return 1 + (h & 0x1f);
  if (h === 0xd9) return 2 + b[at + 1]!;
  if (h === 0xda) return 3 + b.readUInt16BE(at + 1);
  if (h === 0xdb) return 5 + b.readUInt32BE(at + 1);
  throw new Error(`not a msgpack string (0x${h.toString(16)})`);
}

function sameAdd(a: JobAdd, b: JobAdd): boolean {
  const bytes = (x: Buffer | string) => (typeof x === 'string' ? Buffer.from(x) : x);
  return a.keys.join('\n') === b.keys.join('\n') && a.args.every((x, i) => bytes(x).equals(bytes(b.args[i]!)));
}
