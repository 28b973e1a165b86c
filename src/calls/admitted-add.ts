import { createRequire } from 'node:module';
import { Backoffs, Job, type JobJson, type JobsOptions, type Queue } from 'bullmq';
import type { CallJobData } from '../contracts/call.ts';
import { luaSource } from '../redis/lua-scripts.ts';

/**
 * BullMQ's add of one job, as the keys and arguments of its `addStandardJob` script: what
 * `Queue.add` would send, built by BullMQ itself, to be sent inside the caller's admission
 * ({@link ADMITTED_ADD_LUA}) instead of after it.
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

/**
 * The caller's admission and its job's add in one script (issue 31): `budget-note.lua` counts the
 * call's rates and Redis budget and, only when it admits the call, BullMQ's own `addStandardJob`
 * adds the job. Sent one after the other they were two round trips before every call reached
 * its queue; one script is one, and a refused call still adds nothing, now in the same atomic
 * step. KEYS: BullMQ's 9, then budget-note's; ARGV: BullMQ's 3, then budget-note's. Answers
 * budget-note's reply, with the job's id fifth when admitted.
 *
 * The keys are in two hash tags (`{shard-N}` and `{budget-<workspace>}`): fine on one Redis,
 * which is what agentdb runs on; a Redis Cluster would need the two-step path.
 */
export const ADMITTED_ADD_LUA = (): string => `local budgetKeys, budgetArgs = {}, {}
for i = ${ADD.keys + 1}, #KEYS do budgetKeys[#budgetKeys + 1] = KEYS[i] end
for i = 4, #ARGV do budgetArgs[#budgetArgs + 1] = ARGV[i] end
local admitted = (function(KEYS, ARGV)
${luaSource('budget-note.lua')}
end)(budgetKeys, budgetArgs)
if admitted[3] ~= 1 then return admitted end
admitted[5] = (function()
${ADD.content}
end)()
return admitted
`;

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
export function jobAdd(queue: Queue, name: string, data: CallJobData, opts: JobsOptions & { jobId: string }): JobAdd {
  // As Queue.addJob merges them: the queue's defaults under the call's own options; then as the
  // Job's constructor leaves them: attempts 0 unless given, the backoff normalised.
  const merged: JobsOptions = { attempts: 0, ...queue.defaultJobOptions, ...opts };
  for (const option in merged) if (!PLAIN_OPTIONS.has(option)) return jobAddByJob(queue, name, data, opts);
  const { jobId } = opts;
  // Job.validateOptions' checks of an id, the only ones plain options can fail.
  if (`${parseInt(jobId, 10)}` === jobId) throw new Error('Custom Id cannot be integers');
  if (jobId.includes(':') && jobId.split(':').length !== 3) throw new Error('Custom Id cannot contain :');
  if (merged.backoff !== undefined) merged.backoff = Backoffs.normalize(merged.backoff);
  const job = { name, timestamp: Date.now(), data: JSON.stringify(data) } as JobJson;
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
