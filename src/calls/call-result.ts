import { callerSinceOf, callKey, unboundCallIsMine } from '../contracts/call-identity.ts';
import { type Envelope, errorEnvelope } from '../contracts/envelope.ts';
import { errorBody } from '../errors.ts';
import type { CallAnswer } from './call-answers.ts';
import { answerAll, awaitCompletion } from './call-completion-wait.ts';
import type { CallLookup } from './call-lookup.ts';
import type { CallWaiters } from './call-waiters.ts';

/** Which call's result is asked for (a call id belongs to its caller), and whether to wait for it. */
export interface ResultQuery {
  workspace: string;
  agent: string;
  /**
   * A member's record's creation (`Member.createdAt`), or an agent key's registration's
   * (`RegisteredAgent.createdAt`): their calls are keyed by it (see `callKey`), so a call of an
   * earlier member or agent of the name answers NOT_FOUND, and one keyed by the bare name is
   * theirs only if made since (`unboundCallIsMine`). Left out for a member `@name`: the active
   * member's, looked up.
   */
  memberSince?: number;
  wait?: boolean;
  timeoutMs?: number;
  /** Gives the wait up when it aborts (see `CallOptions.signal`). */
  signal?: AbortSignal;
  /** The key the lookup is made with, if any: counted against its rate budget, as its calls are. */
  keyId?: string;
  /**
   * The caller's own follow-up of a call it has just sent (its wait going on past a first
   * answer), already counted as that call: not counted again against the rate limits.
   */
  followUp?: true;
}

/** What fetching a result uses of its client: the waits, the lookup, and the event reader's start. */
export interface ResultSources {
  waiters: CallWaiters;
  lookup: CallLookup;
  /** Starts the client's event reader (once), so a wait can hear the call's completion. */
  ensureReader: () => Promise<unknown>;
  /** Told when the look is done and the wait for the call's end begins (bounded by its timeoutMs). */
  waiting?: () => void;
  /** Settles if the caller gives the look up (Redis answers nothing): the wait set for it goes. */
  gaveUp?: Promise<unknown>;
  /** The registered agent's registration (`RegisteredAgent.createdAt`), undefined when it is not registered. */
  registeredSince?: (workspace: string, agent: string) => Promise<number | undefined>;
  /** The active member `name`'s record's creation (`Member.createdAt`), undefined when none of the name is active. */
  activeMemberSince?: (workspace: string, name: string) => Promise<number | undefined>;
}

/**
 * A call's outcome by its caller and id: its envelope once finished; otherwise, with `wait`,
 * when it finishes, and without, where it stands. Another caller's call of the same id, like an
 * unknown (or long expired) one, answers NOT_FOUND.
 */
export async function callResult(sources: ResultSources, callId: string, query: ResultQuery): Promise<CallAnswer> {
  const opts = await withActiveMember(sources, query);
  const key = callKey(opts.workspace, opts.agent, callId, opts.memberSince);
  const answer = await resultOf(sources, key, callId, opts);
  if (answer.ok || !('error' in answer) || answer.error.code !== 'NOT_FOUND') return answer;
  if (opts.memberSince === undefined) {
    // A runtime's (or the CLI's) lookup by the agent's name, without its key: the call may be one
    // made with the registered agent's key, keyed by its registration (`callKey`). Asked only
    // when the name's own key is unknown, so a runtime's own calls cost nothing more.
    if (opts.agent.startsWith('@') || !sources.registeredSince) return answer;
    const since = await sources.registeredSince(opts.workspace, opts.agent);
    return since === undefined ? answer : resultOf(sources, callKey(opts.workspace, opts.agent, callId, since), callId, opts);
  }
  // A call keyed by the bare name (made before calls were bound, or an agent's runtime's without
  // a key): the caller's only if made since its record was (`unboundCallIsMine`). Looked for only
  // when the bound key is unknown.
  const unbound = callKey(opts.workspace, opts.agent, callId);
  const found = await sources.lookup.find(unbound);
  const data = found?.job.data;
  if (!data || callerSinceOf(data) !== undefined || !unboundCallIsMine(data.enqueuedAt ?? found.job.timestamp, opts.memberSince)) return answer;
  return resultOf(sources, unbound, callId, opts);
}

/**
 * A member's calls asked for by the name alone (`agentdb result --agent @name`, a runtime's
 * client): the active member's, keyed by their record (`callKey`), so an earlier member's of the
 * name answer NOT_FOUND. With none of the name active, only calls made before calls were bound.
 */
async function withActiveMember(sources: ResultSources, opts: ResultQuery): Promise<ResultQuery> {
  if (opts.memberSince !== undefined || !opts.agent.startsWith('@') || !sources.activeMemberSince) return opts;
  const memberSince = await sources.activeMemberSince(opts.workspace, opts.agent.slice(1));
  return memberSince === undefined ? opts : { ...opts, memberSince };
}

async function resultOf(
  { waiters, lookup, ensureReader, waiting, gaveUp }: ResultSources,
  key: string,
  callId: string,
  opts: ResultQuery,
): Promise<CallAnswer> {
  // Listen before looking, so a completion between the look and the wait is not missed.
  let completion: Promise<Envelope> | undefined;
  if (opts.wait) {
    await ensureReader();
    const listened = waiters.completion(key, opts.signal);
    completion = listened;
    void gaveUp?.then(() => waiters.drop(listened));
  }
  // A send may put the job back to run while this looks: what it reads then answers only this wait.
  const stamp = waiters.looking(key);
  const found = await lookup.find(key);
  if (!found) {
    // Only this lookup's own wait ends: a call of that id being sent now still waits for its end.
    waiters.drop(completion);
    return unknownCall(callId, `There is no call ${JSON.stringify(callId)} of ${opts.workspace}/${opts.agent} (or its result has expired).`);
  }
  const { job, queue } = found;
  if (job.finishedOn) {
    const env = await lookup.late(job);
    if (completion) answerAll(waiters, key, env, stamp, completion);
    return env;
  }
  // Announced but not yet marked finished by BullMQ (see `CallWaiters.justAnnounced`).
  const announced = waiters.justAnnounced(key, job.processedOn);
  if (announced) {
    if (completion) answerAll(waiters, key, announced, stamp, completion);
    return announced;
  }
  if (!completion) return (await lookup.standing(key, queue, job)) ?? { ok: false, callId, tool: job.data.tool, status: 'queued' };
  waiting?.();
  return awaitCompletion(waiters, lookup, { key, callId, tool: job.data.tool, queue, completion, timeoutMs: opts.timeoutMs ?? 30_000, withdraw: false });
}

/**
 * What a caller who asked for a call id nobody of theirs sent is told to check: the registry's
 * NOT_FOUND hint speaks of tables and approvals, not of call ids (session 38, N16: `GET
 * /v1/calls/<unknown id>` answered "DATA_DESCRIBE_SCHEMA lists tables and views").
 */
export const UNKNOWN_CALL_HINT =
  "Check the call id: it is the callId of the answer that queued the call (or the one you sent), asked for with the key (or agent) that made it; another caller's call ids are not yours to read, and a result is kept for RESULT_TTL_HOURS (24 by default).";

function unknownCall(callId: string, detail: string): Envelope {
  return { ...errorEnvelope(callId, '', 'NOT_FOUND'), error: errorBody('NOT_FOUND', detail, { NOT_FOUND: UNKNOWN_CALL_HINT }) };
}
