import type { Redis } from 'ioredis';
import { digestOf } from '../contracts/call-identity.ts';
import type { Keys } from '../redis/keys.ts';
import { withScripts, type ScriptedRedis } from '../redis/lua-scripts.ts';
import { callerOf, type KeyedCall, type Principal } from '../registry/principal.ts';

/**
 * The tools whose calls can wait for a person (a write under `approval: "write"`, any drop, db_exec
 * under `policy: "require-approval"`): the only ones a resend could join, so the only ones that pay
 * a look-up. A read never parks.
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
 * Only this record is new; the id it holds is an ordinary generated call id, so the first call
 * pays nothing beyond one GET (and one SET only when it answers pending).
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
   * is. Undefined for a tool that never parks.
   */
  keyFor(principal: Principal, call: KeyedCall): string | undefined {
    if (!MAY_PARK.has(call.tool)) return undefined;
    const who = principal.kind === 'agent' ? { settings: principal.settings } : { member: principal.member };
    const what = digestOf({ tool: call.tool, arguments: call.arguments ?? {}, ...who });
    return this.keys.mcpPendingCall(`${principal.workspace}.${callerOf(principal)}.${what}`);
  }

  /** The call id a waiting call under `key` holds, to send this one under; undefined when none waits. */
  async joinable(key: string): Promise<string | undefined> {
    return (await this.redis.get(key)) ?? undefined;
  }

  /** Notes that `callId`, the call kept under `key`, answered before its outcome: a resend joins it. */
  async remember(key: string, callId: string): Promise<void> {
    await this.redis.set(key, callId, 'EX', this.ttlS);
  }

  /**
   * Ends the join window of `callId` once its outcome was given back: the same call sent later is
   * a new one. Only while the entry still names `callId`: one taken since by a new call is kept.
   */
  async forget(key: string, callId: string): Promise<void> {
    await this.redis.agentdbDeleteIfEqual(key, callId);
  }
}
