import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Redis } from 'ioredis';

/** The folder of agentdb's Lua scripts, one `.lua` file each; `npm run build` copies it beside the built loader. */
export const LUA_SCRIPTS_DIR = new URL('./scripts/', import.meta.url);

/**
 * Every script agentdb runs in Redis, typed as the command each becomes on a connection (see
 * {@link withScripts}). What each script's KEYS and ARGV are is written at the top of its file.
 */
export interface LuaCommands {
  /** complete-calls.lua: keys are counted by the first argument (one usage hash per metered agent and tool). */
  agentdbComplete(numKeys: number, ...keysThenArgs: (string | number)[]): Promise<number>;
  /** {@link NOTED_COMPLETE_LUA}: the number of keys first, then the note's and the completions' keys and arguments. */
  agentdbNotedComplete(numKeys: number, ...keysThenArgs: (string | number)[]): Promise<[n: number, held: string, err: string]>;
  /** {@link FINISH_WITH_LUA}: the number of keys first, then a lone completion's and BullMQ's `moveToFinished`'s keys and arguments. */
  agentdbFinishWith(numKeys: number, ...keysThenArgs: unknown[]): Promise<[rodeOk: number, rode: unknown, finishedOk: number, finished: unknown]>;
  agentdbApprovalCreate(
    key: string,
    pending: string,
    all: string,
    wsPending: string,
    wsAll: string,
    wsExpiring: string,
    request: string,
    ws: string,
    createdAt: number,
    expiresAt: number,
    id: string,
    agent: string,
    tool: string,
    database: string,
  ): Promise<number>;
  agentdbApprovalTransition(
    key: string,
    pending: string,
    wsPending: string,
    wsDecided: string,
    wsExpiring: string,
    undelivered: string,
    revokedDeciders: string,
    state: string,
    by: string,
    reason: string,
    id: string,
    via: string,
    decider: string,
  ): Promise<'OK' | 'NOT_FOUND' | 'CONFLICT' | 'EXPIRED' | 'NOT_YET' | 'REVOKED'>;
  /** decisions-claim.lua: up to `limit` decisions recorded `afterMs` ago or more and still undelivered, each held `holdMs` for the caller. */
  agentdbDecisionsClaim(undelivered: string, afterMs: number, holdMs: number, limit: number): Promise<string[]>;
  agentdbMemberCas(
    members: string,
    memberKeys: string,
    name: string,
    expected: string,
    record: string,
    dropHash: string,
    addHash: string,
    owner: string,
    channel: string,
    change: string,
  ): Promise<number>;
  agentdbOffloadReserve(
    ledger: string,
    now: string,
    id: string,
    bytes: string,
    expiresAt: string,
    cap: string,
  ): Promise<[ok: number, held: string, first: string]>;
  /**
   * budget-note.lua: the number of keys, the ledger and its sum, 0 to 2 rate counters; `now`, the
   * cap (0: none; -1: count only the rates), points, limit and window (s) per rate counter, then member, bytes and goes-at
   * (ms) per entry. The verdict: 1 counted, 0 refused by the budget, 1 + i by the i-th counter;
   * `first`, when the oldest entry goes, only with a refusal by the budget ('' otherwise).
   */
  agentdbBudgetNote(numKeys: number, ...keysThenArgs: string[]): Promise<[held: string, first: string, verdict: number, rateMsLeft: number]>;
  agentdbReleaseDeadOwnerJobs(active: string, stalled: string, stalledCheck: string, prefix: string): Promise<number>;
  /** A queue's active jobs and their locks, flattened: id, lock ('' for none), … */
  agentdbActiveLocks(active: string, prefix: string): Promise<string[]>;
  /** clear-stale-marker.lua: 1 when the queue's base marker was removed (no job could be taken). */
  agentdbClearStaleMarker(marker: string, wait: string, prioritized: string, delayed: string): Promise<number>;
  /** 1 when the lease is ours now; else the holder's token. */
  agentdbLeaseAcquire(lease: string, token: string, ttlMs: string): Promise<1 | string>;
  agentdbLeaseTakeFrom(lease: string, token: string, ttlMs: string, holder: string): Promise<number>;
  agentdbLeaseRelease(lease: string, token: string): Promise<number>;
  /** join-claim.lua: the call id to send under, and 1 when it was another send's (joined), 0 when claimed now. */
  agentdbJoinClaim(joinKey: string, sendsKey: string, callId: string, ttlS: string): Promise<[callId: string, joined: number]>;
  /** join-forget.lua: 1 when the join entry held the call id and is gone with its count of sends, else 0. */
  agentdbJoinForget(joinKey: string, sendsKey: string, callId: string): Promise<number>;
  /**
   * join-let-go-unsent.lua: 1 when the join entry held the call id, no call was taken under it,
   * no other send under it is on its way, and it is gone; else 0.
   */
  agentdbJoinLetGoUnsent(joinKey: string, sendsKey: string, claimKey: string, callId: string): Promise<number>;
  /** mcp-task-link.lua: 1 when the call's task link now names the new task; else the task id it names ('' for none). */
  agentdbMcpTaskLink(link: string, expected: string, taskId: string, ttlMs: string): Promise<1 | string>;
  /** call-id-yield.lua: 1 when the claim was `from`'s (or none) and is now `claim`, for `ttlS`; else 0. */
  agentdbCallIdYield(claimKey: string, from: string, claim: string, ttlS: string): Promise<number>;
  /** call-find.lua: the claim key, then one job hash key per shard, then shards to ask first; answers the shard and the job's hash, or [-1]. */
  agentdbCallFind(numKeys: number, ...keysThenShards: (string | number)[]): Promise<[shard: number, hash?: string[]]>;
  /** approval-index-backfill.lua: 1 when the approval exists and is now in its workspace's indexes, 0 when gone. */
  agentdbApprovalIndexBackfill(key: string, all: string, wsPending: string, wsDecided: string, wsAll: string, wsExpiring: string, id: string): Promise<number>;
  /** approval-facets.lua: 1 when the approval exists and now keeps its agent, tool and database beside its request. */
  agentdbApprovalFacets(key: string, agent: string, tool: string, database: string): Promise<number>;
  /** The record as it was (null when unknown); a record not yet spent is marked `spent` with its TTL. */
  agentdbOauthSpend(key: string, spentMark: string): Promise<string | null>;
  /** oauth-issue.lua: 1 when the grant's new tokens were written, 0 when the grant is gone (revoked meanwhile). */
  agentdbOauthIssue(
    ...keysThenArgs: [...keys: OAuthIssueKeys, grantRecord: string, accessRecord: string, grantId: string, ...ttlsChannelNowKept: string[]]
  ): Promise<number>;
  /** oauth-grant-drop.lua: 1 when the grant was there; it, its access token and its tokens' records are gone either way. */
  agentdbOauthGrantDrop(grant: string, tokens: string, accessPrefix: string, registryChanges: string, endedHead: string, endedTail: string): Promise<number>;
  /** oauth-client-slot.lua: a place among unconsented clients within the cap, or the time the first one lapses (ms). */
  agentdbOauthClientSlot(
    unconsented: string,
    now: string,
    clientId: string,
    lapsesAt: string,
    cap: string,
  ): Promise<[taken: number, count: number, first: string]>;
  /** oauth-client-hold.lua: 1 when the client is now held by the grant and kept at least `ttlS`, 0 for no such client or grant. */
  agentdbOauthClientHold(client: string, holders: string, grant: string, grantId: string, ttlS: string): Promise<number>;
  /** fair-place.lua for a job `queue.add` added (`fairPlaceAddedLua`): the wait key, the job id, its workspace's ledger key; 1 when it moved. */
  agentdbFairPlaceAdded(waitKey: string, jobId: string, workspaceTag: string): Promise<number>;
  agentdbOutsideKillNote(kills: string, digest: string, windowMs: string, cap: string): Promise<number>;
  /** oauth-client-release.lua: how many live grants still hold the client (0: it is back to the unconsented lifetime). */
  agentdbOauthClientRelease(...keysThenArgs: [client: string, holders: string, unconsented: string, ...grantIdPrefixTtlClientNow: string[]]): Promise<number>;
}

/** oauth-issue.lua's keys: the grant, the new access and refresh tokens, the old access token, the grant's tokens' records. */
type OAuthIssueKeys = [grant: string, access: string, refresh: string, oldAccess: string, tokens: string];

/** A connection with agentdb's scripts defined on it. */
export type ScriptedRedis = Redis & LuaCommands;

/**
 * Each command's file, and how many of its arguments are keys (absent: its first argument says);
 * `lua`, the script made of its file, when the file is a fragment that other scripts run too.
 */
const SCRIPTS: Record<keyof LuaCommands, { file: string; keys?: number; lua?: () => string }> = {
  agentdbComplete: { file: 'complete-calls.lua' },
  agentdbNotedComplete: { file: 'complete-calls.lua', lua: () => NOTED_COMPLETE_LUA() },
  agentdbFinishWith: { file: 'complete-calls.lua', lua: () => FINISH_WITH_LUA() },
  agentdbApprovalCreate: { file: 'approval-create.lua', keys: 6 },
  agentdbApprovalTransition: { file: 'approval-transition.lua', keys: 7 },
  agentdbDecisionsClaim: { file: 'decisions-claim.lua', keys: 1 },
  agentdbApprovalIndexBackfill: { file: 'approval-index-backfill.lua', keys: 6 },
  agentdbApprovalFacets: { file: 'approval-facets.lua', keys: 1 },
  agentdbMemberCas: { file: 'member-cas.lua', keys: 2 },
  agentdbOffloadReserve: { file: 'offload-reserve.lua', keys: 1 },
  agentdbBudgetNote: { file: 'budget-note.lua', lua: () => budgetNoteLua() },
  agentdbReleaseDeadOwnerJobs: { file: 'release-dead-owner-jobs.lua', keys: 3 },
  agentdbActiveLocks: { file: 'active-locks.lua', keys: 1 },
  agentdbClearStaleMarker: { file: 'clear-stale-marker.lua', keys: 4 },
  agentdbLeaseAcquire: { file: 'lease-acquire.lua', keys: 1 },
  agentdbLeaseTakeFrom: { file: 'lease-take-from.lua', keys: 1 },
  agentdbLeaseRelease: { file: 'lease-release.lua', keys: 1 },
  agentdbJoinClaim: { file: 'join-claim.lua', keys: 2 },
  agentdbJoinForget: { file: 'join-forget.lua', keys: 2 },
  agentdbJoinLetGoUnsent: { file: 'join-let-go-unsent.lua', keys: 3 },
  agentdbCallFind: { file: 'call-find.lua' },
  agentdbMcpTaskLink: { file: 'mcp-task-link.lua', keys: 1 },
  agentdbCallIdYield: { file: 'call-id-yield.lua', keys: 1 },
  agentdbOauthSpend: { file: 'oauth-spend.lua', keys: 1 },
  agentdbOauthIssue: { file: 'oauth-issue.lua', keys: 5 },
  agentdbOauthGrantDrop: { file: 'oauth-grant-drop.lua', keys: 2 },
  agentdbOauthClientSlot: { file: 'oauth-client-slot.lua', keys: 1 },
  agentdbOauthClientHold: { file: 'oauth-client-hold.lua', keys: 3 },
  agentdbOauthClientRelease: { file: 'oauth-client-release.lua', keys: 3 },
  agentdbFairPlaceAdded: { file: 'fair-place.lua', keys: 1, lua: () => fairPlaceAddedLua() },
  agentdbOutsideKillNote: { file: 'outside-kill-note.lua', keys: 1 },
};

/** The scripts' text, read once per process on first use. */
let sources: Map<string, string> | undefined;

/** The text of one of agentdb's scripts (`file` in {@link LUA_SCRIPTS_DIR}), read once per process. */
export function luaSource(file: string): string {
  sources ??= new Map();
  let lua = sources.get(file);
  if (lua === undefined) {
    lua = readFileSync(new URL(file, LUA_SCRIPTS_DIR), 'utf8');
    sources.set(file, lua);
  }
  return lua;
}

/**
 * One call's budget note, written at once: budget-note.lua, the fragment that a batch of admitted
 * adds (src/calls/admitted-add-batch.ts) and a worker's noted completions run too, for a batch of
 * one. Answers `note`'s reply, or its error reply.
 */
export function budgetNoteLua(): string {
  return `${luaSource('budget-note.lua')}
local reply = note(KEYS, ARGV)
writeNotes()
return reply`;
}

/** fair-place.lua run on its own, for a job added by the command before it (`src/redis/fair-place-added.ts`). */
export const fairPlaceAddedLua = (): string => `${luaSource('fair-place.lua')}
return fairPlace(KEYS[1], ARGV[1], ARGV[2], true) and 1 or 0`;

/**
 * A workspace's budget note and a batch of completions in one script (issue 31): `budget-note.lua`
 * (`budgetNoteLua`) with the note's keys and arguments, then `complete-calls.lua` with the
 * completions'. Sent one after the other they were two scripts per call on the worker's
 * connection, each an EVALSHA Redis parses and runs; the note still goes first, so whoever hears
 * of a call hears of it after its count. The note runs in `pcall`: a note that fails (a budget key
 * of the wrong type, a sum that is not an integer) is reported to the budget as it was alone, and
 * the completions still go out.
 * KEYS: the note's, then the completions'. ARGV: how many of the keys are the note's, how many
 * of the arguments after these two are the note's, the note's arguments, then the completions'.
 * Returns {completions announced, budget-note's held sum (or ''), the note's error (or '')}.
 *
 * The keys are in two hash tags (`{budget-<workspace>}` and `{calls}`): fine on one Redis, which
 * is what agentdb runs on, as the caller's `ADMITTED_ADDS_LUA`; a Redis Cluster would need the
 * two scripts.
 */
export const NOTED_COMPLETE_LUA = (): string => `local nk, na = tonumber(ARGV[1]), tonumber(ARGV[2])
local noteKeys, noteArgs, doneKeys, doneArgs = {}, {}, {}, {}
for i = 1, #KEYS do
  if i <= nk then noteKeys[#noteKeys + 1] = KEYS[i] else doneKeys[#doneKeys + 1] = KEYS[i] end
end
for i = 3, #ARGV do
  if i <= 2 + na then noteArgs[#noteArgs + 1] = ARGV[i] else doneArgs[#doneArgs + 1] = ARGV[i] end
end
local ok, noted = pcall(function(KEYS, ARGV)
${budgetNoteLua()}
end, noteKeys, noteArgs)
local n = (function(KEYS, ARGV)
${luaSource('complete-calls.lua')}
end)(doneKeys, doneArgs)
if not ok or noted.err then
  return {n, '', type(noted) == 'table' and tostring(noted.err) or tostring(noted)}
end
return {n, noted[1], ''}
`;

/** The BullMQ the worker completes jobs with (package.json pins it): its script is the one this build embeds. */
const bullmqFinish = (): { name: string; content: string; keys: number } =>
  (createRequire(import.meta.url)('bullmq/dist/cjs/scripts/moveToFinished-14.js') as { moveToFinished: { name: string; content: string; keys: number } })
    .moveToFinished;

/** Keys of BullMQ's `moveToFinished`, the last of {@link FINISH_WITH_LUA}'s. */
export const FINISH_KEYS = 14;

/**
 * A lone call's completion (complete-calls.lua, with its workspace's budget note first when
 * ARGV[3] is '1': {@link NOTED_COMPLETE_LUA}), then BullMQ's `moveToFinished` of its job, in one
 * script (issue 31, session 32). A sequential call's worker sent them back to back, two scripts
 * Redis read, parsed and answered apart and two replies the worker read; the event still goes
 * first, and the job is stored finished before the caller can hear of it.
 * KEYS: the completion's, then BullMQ's 14. ARGV: how many keys are the completion's, how many
 * arguments are its, '1' when it carries a note, its arguments, then BullMQ's (last: BullMQ's
 * last may be missing). Returns {1, the completion's answer (or 0, its error), 1, BullMQ's (or 0,
its error)}.
 */
export const FINISH_WITH_LUA = (): string => `local nk, na = tonumber(ARGV[1]), tonumber(ARGV[2])
local rk, ra, bk, ba = {}, {}, {}, {}
for i = 1, #KEYS do
  if i <= nk then rk[#rk + 1] = KEYS[i] else bk[#bk + 1] = KEYS[i] end
end
for i = 4, #ARGV do
  if i <= 3 + na then ra[#ra + 1] = ARGV[i] else ba[#ba + 1] = ARGV[i] end
end
-- Each part in pcall: one failing does not stop the other, as when they were two scripts.
local function why(e) return type(e) == 'table' and e.err or tostring(e) end
local noted = ARGV[3] == '1'
local rok, rode = pcall(function(KEYS, ARGV)
  if noted then
    return (function()
${NOTED_COMPLETE_LUA()}
    end)()
  end
  return (function()
${luaSource('complete-calls.lua')}
  end)()
end, rk, ra)
local fok, finished = pcall(function(KEYS, ARGV)
${bullmqFinish().content}
end, bk, ba)
return {rok and 1 or 0, rok and rode or why(rode), fok and 1 or 0, fok and finished or why(finished)}
`;

/**
 * Defines every agentdb script on `redis` (once: a connection that has them is returned as it
 * is) and returns it typed with them. ioredis then runs each by EVALSHA, sending the text again
 * only when Redis answers NOSCRIPT (after a restart or SCRIPT FLUSH). Whatever takes a
 * connection into use calls this, so a connection made anywhere (tests make their own) works.
 */
export function withScripts(redis: Redis): ScriptedRedis {
  const scripted = redis as ScriptedRedis;
  for (const [name, { file, keys, lua: made }] of Object.entries(SCRIPTS) as [keyof LuaCommands, (typeof SCRIPTS)[keyof LuaCommands]][]) {
    if (typeof scripted[name] === 'function') continue;
    const lua = made ? made() : luaSource(file);
    redis.defineCommand(name, keys === undefined ? { lua } : { lua, numberOfKeys: keys });
  }
  return scripted;
}
