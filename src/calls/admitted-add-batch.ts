import type { Redis } from 'ioredis';
import { luaSource } from '../redis/lua-scripts.ts';
import { ADD_KEYS, ADD_LUA } from './admitted-add.ts';

/** One call's admitted add: its keys and arguments as one call's part of {@link ADMITTED_ADDS_LUA} takes them. */
export interface AdmittedAddCommand {
  /** BullMQ's 9 keys, then budget-note's. */
  keys: (string | Buffer)[];
  /** BullMQ's 3 arguments, then budget-note's. */
  args: (string | Buffer)[];
}

/** budget-note's reply, with the job's id fifth when admitted. */
export type AdmittedAddReply = [held: string, first: string, verdict: number, rateMsLeft: number, jobId?: string];

/** A connection that runs the admission's script. */
type BatchingRedis = Redis & {
  agentdbAdmittedAdds(numKeys: number, ...keysThenArgs: (string | Buffer)[]): Promise<(AdmittedAddReply | Error)[]>;
};

/**
 * The most calls one script carries: its keys and arguments stay bounded (a call has ~12 keys
 * and ~12 arguments, one up to MAX_CALL_BYTES), and Redis, which runs a script through to its
 * end, is held by one batch no longer than by 64 calls' admissions.
 */
export const ADDS_PER_SCRIPT = 64;

/**
 * The caller's admission and its job's add in one script (issue 31), for the calls of one turn
 * (one or more): for each call in turn, `budget-note.lua` counts its rates and Redis budget
 * and, only when it admits the call, BullMQ's own `addStandardJob` adds the job. Sent one after
 * the other they were two round trips before every call reached its queue; in one script a
 * refused call still adds nothing, in the same atomic step.
 *
 * KEYS: each set of keys once (a call's are BullMQ's 9, then budget-note's: the calls of one
 * workspace on one shard share theirs, which were sent again for each, 11 keys and ~450 bytes a
 * call at 64 in flight). ARGV: the number of calls and of key sets, each set's number of keys,
 * each call's set and number of arguments, then each call's arguments in turn (BullMQ's 3, then
 * budget-note's). Answers one reply per call, in order: budget-note's reply, with the job's id
 * fifth when admitted, or an error reply for a call whose part failed (`pcall`), which fails no
 * other call. As a failed script of one call does, a call whose part failed keeps what it wrote
 * before the failure.
 *
 * What the budget note can sum is written once per workspace (and rate counter) per script, at
 * its end (`writeNotes`; issue 31: run once per call, the note was ~8 of a call's inner commands
 * at 64 in flight): the ledger's sum (one GET, one INCRBY), the sweep of what has gone (again only
 * when a call's `now` is later, or the last sweep hit its limit), the keys' expiry (one ZRANGE,
 * two PEXPIREAT), and each rate counter (one SET NX and one INCRBY). The ledger keeps an entry per
 * call, each released on its own by the sweep or the worker's note, as before.
 *
 * The keys are in two hash tags (`{shard-N}` and `{budget-<workspace>}`): fine on one Redis,
 * which is what agentdb runs on; a Redis Cluster would need the two-step path.
 */
export const ADMITTED_ADDS_LUA = (): string => `${luaSource('budget-note.lua')}
${luaSource('fair-place.lua')}
local function admittedAdd(KEYS, ARGV)
  local budgetKeys, budgetArgs = {}, {}
  for i = ${ADD_KEYS + 1}, #KEYS do budgetKeys[#budgetKeys + 1] = KEYS[i] end
  for i = 4, #ARGV do budgetArgs[#budgetArgs + 1] = ARGV[i] end
  local admitted = note(budgetKeys, budgetArgs)
  if admitted[3] ~= 1 then return admitted end
  admitted[5] = (function()
${ADD_LUA}
  end)()
  -- Its place only orders the queue: a failure there leaves the job where the add put it, and
  -- the call admitted (its reply an error would say "not added" of a job that runs).
  pcall(fairPlace, KEYS[1], admitted[5], budgetKeys[1])
  return admitted
end
local n, s = tonumber(ARGV[1]), tonumber(ARGV[2])
local sets, k = {}, 1
for i = 1, s do
  local keys = {}
  for j = 1, tonumber(ARGV[2 + i]) do keys[j] = KEYS[k]; k = k + 1 end
  sets[i] = keys
end
local a = 3 + s + 2 * n
local replies = {}
for c = 1, n do
  local keys, argv = sets[tonumber(ARGV[1 + s + 2 * c])], {}
  for i = 1, tonumber(ARGV[2 + s + 2 * c]) do argv[i] = ARGV[a]; a = a + 1 end
  local ok, reply = pcall(admittedAdd, keys, argv)
  if ok then
    replies[c] = reply
  else
    replies[c] = { err = type(reply) == 'table' and reply.err or tostring(reply) }
  end
end
writeNotes()
return replies
`;

interface Pending extends AdmittedAddCommand {
  resolve(reply: AdmittedAddReply): void;
  reject(err: unknown): void;
}

/**
 * The admitted adds of one turn of the caller's event loop in one script (issue 31: at 64 calls
 * in flight the caller's one script per call was ~1 of the ~2.2 scripts a call cost Redis, and
 * one write to its socket per call). Sent when the turn's microtasks have all run (a microtask
 * that queues a `nextTick`: whatever the calls answered by one socket read start in its
 * microtasks, they all go), never after a timer: a call alone leaves in the turn it was made, in a
 * script of its own (the same script: one text for one call and many). A Redis error fails each
 * call of the batch with that error, as it would have failed each one's own script.
 */
export class AdmittedAddBatch {
  private pending: Pending[] = [];

  constructor(private readonly redis: Redis) {}

  /** Admits and adds one call, with the others of this turn. */
  send(command: AdmittedAddCommand): Promise<AdmittedAddReply> {
    return new Promise((resolve, reject) => {
      this.pending.push({ ...command, resolve, reject });
      if (this.pending.length === 1) queueMicrotask(() => process.nextTick(() => this.flush()));
    });
  }

  private flush(): void {
    const all = this.pending;
    this.pending = [];
    const redis = this.scripted();
    for (let at = 0; at < all.length; at += ADDS_PER_SCRIPT) {
      const batch = all.slice(at, at + ADDS_PER_SCRIPT);
      // Each call's keys as a set sent once: calls of one workspace and shard name the same.
      const sets = new Map<string, number>();
      const keys: (string | Buffer)[] = [];
      const setSizes: string[] = [];
      const perCall: string[] = [];
      for (const c of batch) {
        const id = c.keys.join('\n');
        let set = sets.get(id);
        if (set === undefined) {
          sets.set(id, (set = sets.size + 1));
          keys.push(...c.keys);
          setSizes.push(String(c.keys.length));
        }
        perCall.push(String(set), String(c.args.length));
      }
      const args = batch.flatMap((c) => c.args);
      redis.agentdbAdmittedAdds(keys.length, ...keys, String(batch.length), String(sets.size), ...setSizes, ...perCall, ...args).then(
        (replies) =>
          batch.forEach((c, i) => {
            const reply = replies[i];
            if (reply instanceof Error) c.reject(reply);
            else if (reply) c.resolve(reply);
            else c.reject(new Error(`the batch's script answered ${replies.length} replies for ${batch.length} calls`));
          }),
        (err: unknown) => {
          for (const c of batch) c.reject(err);
        },
      );
    }
  }

  /** The connection with the script defined on it (on first use: only a caller adds jobs). */
  private scripted(): BatchingRedis {
    const redis = this.redis as BatchingRedis;
    if (typeof redis.agentdbAdmittedAdds !== 'function') redis.defineCommand('agentdbAdmittedAdds', { lua: ADMITTED_ADDS_LUA() });
    return redis;
  }
}
