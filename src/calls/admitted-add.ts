import { createRequire } from 'node:module';
import { Job, type JobsOptions, type Queue } from 'bullmq';
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
 * The keys and arguments `queue.add(name, data, opts)` would send, built by BullMQ's own `Job`
 * (its encoding of the data and options, its key names) with nothing sent: BullMQ builds them
 * and hands them to its client's `runCommand` in the same turn, which this captures.
 * @throws Error when BullMQ no longer builds a standard add that way (a version not pinned).
 */
export function jobAdd(queue: Queue, name: string, data: CallJobData, opts: JobsOptions & { jobId: string }): JobAdd {
  // As Queue.addJob merges them: the queue's defaults under the call's own options.
  const job = new Job(queue, name, data, { ...queue.defaultJobOptions, ...opts }, opts.jobId);
  let captured: { command: string; list: (Buffer | string)[] } | undefined;
  const capture = {
    runCommand: (command: string, list: (Buffer | string)[]) => {
      captured = { command, list };
      return Promise.resolve(opts.jobId);
    },
  };
  void job.addJob(capture as never, { parentDependenciesKey: '' }).catch(() => undefined);
  // Set by the capture above, in this turn (the compiler cannot see it run).
  const got = captured as typeof captured;
  if (!got?.command.startsWith(`${ADD.name}:`) || got.list.length !== ADD.keys + 3) {
    throw new Error(`BullMQ ${got?.command ?? '(nothing)'} is not the standard add this client embeds (${ADD.name}, ${ADD.keys} keys)`);
  }
  const { list } = got;
  const args = list.slice(ADD.keys) as JobAdd['args'];
  return { keys: list.slice(0, ADD.keys) as string[], args, dataJson: args[1] };
}
