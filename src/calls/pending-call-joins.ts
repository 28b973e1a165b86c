import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { callKey, digestOf } from '../contracts/call-identity.ts';
import { isTransient } from './call-answers.ts';
import type { Keys } from '../redis/keys.ts';
import { withScripts, type ScriptedRedis } from '../redis/lua-scripts.ts';
import { callerOf, type KeyedCall, type Principal } from '../registry/principal.ts';

/**
 * The tools whose calls can wait for a person (a write under `approval: "write"`, any drop, db_exec
 * under `policy: "require-approval"`): the only ones a resend could join, and the ones offered as
 * MCP tasks. A read never parks.
 */
export const MAY_PARK: ReadonlySet<string> = new Set(['DATA_WRITE_SQL', 'DATA_DROP_TABLE', 'db_exec']);

/**
 * Lets a caller without call ids of its own (an MCP client: its `tools/call` carries none) send a
 * waiting write again and reach the same call (issue 28). Each agent framework retries a tool call
 * whose answer was "pending" or a timeout, and each retry used to make a second pending approval
 * for the same write.
 *
 * While a call waits (parked for a person, or still queued when its answer left), the call id it
 * was given is kept under the caller and what the call is: tool, canonical arguments and the
 * caller's settings (or role), which together fix the database it reaches. The same call sent
 * again by the same principal takes that id, so the client's call-id machinery joins it to the
 * first (`addOrJoin`): no second job, no second approval, and the first call's outcome once
 * decided. The window ends when an outcome is given back over this surface ({@link forget}): the
 * same write sent after it is a new write and runs again. A call never resent leaves its entry
 * until the call itself is gone from Redis (its approval's life and its kept result).
 *
 * Only this record (and its count of sends not yet taken) is new; the id it holds is an ordinary
 * generated call id, claimed before the call is enqueued so that sends at the same moment join
 * (one script per send, one more when its outcome is out at once).
 */
export class PendingCallJoins {
  private readonly redis: ScriptedRedis;

  constructor(
    redis: Redis,
    private readonly keys: Keys,
    /** How long an entry lives: the approval's TTL and the result's, in seconds. */
    private readonly ttlS: number,
  ) {
    this.redis = withScripts(redis);
  }

  /**
   * Where a call like `call` by `principal` is kept while it waits: the caller and what the call
   * is. Undefined for a call that never parks (so pays nothing here).
   */
  keyFor(principal: Principal, call: KeyedCall): string | undefined {
    if (!mayPark(principal, call.tool)) return undefined;
    // An agent's registration too (`since`): one removed and registered again under its name,
    // with the same settings, is another, and its identical write took the earlier one's waiting
    // id, answered NOT_FOUND, a refusal saying nothing ran, for a write never sent (hostile review T4).
    const who =
      principal.kind === 'agent'
        ? { settings: principal.settings, ...(principal.since !== undefined ? { since: principal.since } : {}) }
        : { member: principal.member };
    const what = digestOf({ tool: call.tool, arguments: call.arguments ?? {}, ...who });
    return this.keys.mcpPendingCall(`${principal.workspace}.${callerOf(principal)}.${what}`);
  }

  /**
   * The call id to send a call kept under `key` with: the id of the one already waiting there,
   * or a new one, claimed under `key` before the call is enqueued, so that sends at the same
   * moment all take the first one's id and the client's call-id machinery makes one call of them
   * (one approval). `joined` says the id was another send's. Each send under the id is counted
   * until one is taken (see {@link letGoUnsent}). A claimed id whose call ends at once (ran, or
   * was refused) is let go with {@link forget}; a send refused RATE_LIMITED lets go with
   * {@link letGoUnsent} (else anyone past their rate could have Redis keep one uncounted entry per
   * distinct write for the approval's life); one whose call met UNAVAILABLE may stay: a resend
   * under it simply sends the call.
   */
  async claim(key: string): Promise<{ callId: string; joined: boolean }> {
    const [callId, joined] = await this.redis.agentdbJoinClaim(key, this.keys.mcpPendingSends(key), randomUUID(), String(this.ttlS));
    return { callId, joined: joined === 1 };
  }

  /** Notes that `callId`, the call kept under `key`, still waits: a resend joins it (the window renewed). */
  async remember(key: string, callId: string): Promise<void> {
    await this.redis.set(key, callId, 'EX', this.ttlS);
  }

  /**
   * Ends the join window of `callId` once its outcome was given back: the same call sent later is
   * a new one. Only while the entry still names `callId`: one taken since by a new call is kept.
   */
  async forget(key: string, callId: string): Promise<void> {
    await this.redis.agentdbJoinForget(key, this.keys.mcpPendingSends(key), callId);
  }

  /**
   * Lets go of `callId`, the id this send claimed or joined under `key`, whose call was refused
   * before it was taken (RATE_LIMITED, or QUOTA_EXCEEDED by the Redis budget): kept, it was an
   * uncounted entry for the approval's life.
   * Only as the last send under the id not taken: another may still be admitted under it (an
   * identical send that joined the id and is on its way), and an entry gone before then let a
   * third identical send claim a new id and make a second call with a second approval. Nor once
   * a send under the id was taken (the call id's claim, set when a call under it is admitted,
   * exists): the id is a waiting call's. Checked, counted and deleted in one script.
   */
  async letGoUnsent(principal: Principal, key: string, callId: string): Promise<void> {
    const claim = this.keys.callIdClaim(callKey(principal.workspace, callerOf(principal), callId, principal.since));
    await this.redis.agentdbJoinLetGoUnsent(key, this.keys.mcpPendingSends(key), claim, callId);
  }

  /**
   * What a send's answer makes of the join id it claimed or joined under `key`: an outcome ends
   * the window ({@link forget}); a refusal for the moment (RATE_LIMITED, UNAVAILABLE) is no
   * outcome, and the call may still wait, but a RATE_LIMITED refusal was never counted nor
   * enqueued: kept for the approval's life, an agent past its rate could fill Redis with one
   * uncounted entry per distinct write (hostile review T1), so the send lets go of it
   * ({@link letGoUnsent}, which keeps it while another send under the id may still be taken).
   * So does a QUOTA_EXCEEDED refused before it was taken (`untaken`: the Redis budget, counted
   * before a send joins): ended as an outcome, it let the next identical send take a new id and,
   * once the budget had room, make a second call with a second approval while the first waited
   * (session 27, O1). A QUOTA_EXCEEDED of a call that ran (a disk quota) is its outcome.
   */
  async settle(
    principal: Principal,
    key: string,
    claim: { callId: string; joined: boolean },
    answer: { ok: boolean; error?: { code: string } },
    pending: boolean,
    untaken = false,
  ): Promise<void> {
    const code = answer.ok ? undefined : answer.error?.code;
    if (code === 'RATE_LIMITED' || (untaken && code === 'QUOTA_EXCEEDED')) await this.letGoUnsent(principal, key, claim.callId);
    else if (!pending && !isTransient(answer)) await this.forget(key, claim.callId);
  }
}

/**
 * Whether `principal`'s calls of `tool` can wait for a person, by the approval rule
 * (src/policy/approval-rule.ts): an agent's drop, its write under `approval: "write"`, its
 * db_exec under `policy: "require-approval"`. A member's calls never wait. Only these claim a
 * join id (a SET, and their call sent under its own id) before they are enqueued.
 */
function mayPark(principal: Principal, tool: string): boolean {
  if (principal.kind !== 'agent' || !MAY_PARK.has(tool)) return false;
  if (tool === 'DATA_DROP_TABLE' || principal.settings.approval === 'write') return true;
  return tool === 'db_exec' && principal.surface.kind === 'db' && principal.surface.policy === 'require-approval';
}
