import { hash } from 'node:crypto';
import type { CallJobData } from './call.ts';

/**
 * A call is identified by its caller: workspace, agent and the call id. Runtimes pick their own
 * call ids (`<agent>-<step>`), which repeat across workspaces and agents, so a bare call id
 * named one workspace's approval, result and exactly-once record for another's call (a hostile
 * tenant ran writes nobody in its workspace approved). Every id agentdb keys on — the BullMQ
 * job id, waiters, events, approvals, the exactly-once record — is derived from this key.
 *
 * `.` separates the parts: names are `[a-z0-9_-]` and call ids `[A-Za-z0-9_-]`, so the key is
 * unambiguous, and it stays readable in Redis for operators (`acme.scout.step-1`).
 */
export function callKey(workspace: string, agent: string, callId: string, memberSince?: number): string {
  return `${workspace}.${boundCaller(agent, memberSince)}.${callId}`;
}

/**
 * A member's caller bound to their member record: `@<name>~<createdAt>`. A member revoked and
 * added again under the same name is another person, who read the first one's results and met
 * their call ids (IDEMPOTENCY_CONFLICT said their SQL differed) while both were keyed `@<name>`
 * (hostile review T2). `~` is in neither alphabet, nor is it ':' (BullMQ job ids hold none).
 * An agent key's caller is bound the same way to its agent's registration, `<agent>~<createdAt>`:
 * an agent removed and registered again under its name found the earlier registration's call ids
 * taken, and a write under one could be answered from the earlier write's exactly-once record
 * (session 28, L1). Calls made before either was bound carry no `since`, and keep the bare name,
 * as a runtime's calls by the agent's name without a key still do: {@link unboundCallIsMine}
 * says whose they are.
 */
function boundCaller(agent: string, memberSince: number | undefined): string {
  return memberSince === undefined ? agent : `${agent}~${memberSince}`;
}

/**
 * The key of a call's job data: a member's call by its member record's creation, an agent key's
 * call by its agent's registration, when it carries them.
 */
export function callKeyOf(data: Pick<CallJobData, 'workspace' | 'agent' | 'callId' | 'member' | 'agentSince'>): string {
  return callKey(data.workspace, data.agent, data.callId, callerSinceOf(data));
}

/**
 * What a call's caller is bound to (see {@link boundCaller}): the member record's creation of a
 * person's call, the registration's of a call made with an agent key; undefined for a runtime's
 * call by the agent's name (no key) and for calls made before either was bound.
 */
export function callerSinceOf(data: Pick<CallJobData, 'member' | 'agentSince'>): number | undefined {
  return data.member?.since ?? data.agentSince;
}

/**
 * The key a call bound to its member record or agent registration (`<workspace>.<caller>~<since>.<call id>`)
 * had before calls were bound (`<workspace>.<caller>.<call id>`), and the record's creation; or
 * undefined for an unbound key. Where only the key travels (a
 * write's exactly-once record), this is how a call made before the binding is still found.
 */
export function unboundKeyOf(key: string): { key: string; since: number } | undefined {
  // Every write asks: a runtime's keys have no `~`, and need no pattern run over them.
  const m = key.includes('~') ? BOUND_KEY.exec(key) : null;
  return m ? { key: `${m[1]}.${m[2]}.${m[4]}`, since: Number(m[3]) } : undefined;
}

const BOUND_KEY = /^([^.]+)\.([^.~]+)~(\d+)\.([^.]+)$/;

/**
 * Whether a call keyed by the bare name (made before calls were bound, see {@link boundCaller},
 * or an agent's runtime's without a key) is the current member's or agent registration's, created
 * at `memberSince`: only if it was made at or after that. Whoever held the name before was revoked
 * or removed before this record was created, so a call made since is this one's; an earlier one
 * is not (as `agentSince` rules agent keys minted before it was recorded).
 */
export function unboundCallIsMine(madeAt: number, memberSince: number): boolean {
  return madeAt >= memberSince;
}

/** Sorts an object's keys as it is serialised; arrays and scalars as they are. */
const sortedKeys = (_key: string, v: unknown): unknown =>
  v && typeof v === 'object' && !Array.isArray(v)
    ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    : v;

/** Whether `value` holds an object other than an array, at any depth (only those have keys to sort). */
function holdsObject(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (!Array.isArray(value)) return true;
  for (const v of value) if (holdsObject(v)) return true;
  return false;
}

/**
 * JSON with object keys sorted, so two equal payloads serialise alike whatever order a runtime
 * built them in. Without an object inside (a write's digest: its SQL and scalar params) that is
 * plain `JSON.stringify`, without a replacer called for every value (issue 31).
 */
export function canonicalJson(value: unknown): string {
  return holdsObject(value) ? JSON.stringify(value, sortedKeys) : JSON.stringify(value);
}

/**
 * sha256 hex of the canonical JSON of `value`. One-shot `hash`, not a `Hash` object: every write
 * computes one in the child, and building the object was most of it (issue 31).
 */
export function digestOf(value: unknown): string {
  return hash('sha256', canonicalJson(value), 'hex');
}

/**
 * What a call is, for its call id: the tool, its arguments as the caller sent them (canonical
 * JSON, so key order does not matter), the caller's settings and the database the call
 * reaches. The call key says who calls; this says what they asked. The database is in it because
 * the same arguments reach another database under other settings, and a call's job sits on its
 * database's shard queue: the same id sent with another scope went to another queue, where no
 * earlier job of that id existed, and ran as a second call (issue 25). The client stores the
 * fingerprint with the call key (see `AgentDbClient`) before it enqueues anything, so the check
 * holds whichever shard each call would reach.
 */
export function callFingerprint(call: Pick<CallJobData, 'tool' | 'arguments' | 'settings'> & { database: string }): string {
  return digestOf({ tool: call.tool, arguments: call.arguments ?? {}, settings: call.settings, database: call.database });
}

/**
 * What differs between two calls sent under the same key, as field paths a caller can act on
 * (`tool`, `arguments.sql`, `settings.approval`); empty when they are the same call. A call id
 * is an idempotency key: the same payload answers the first call's outcome, another is refused.
 */
export function payloadDifferences(a: Pick<CallJobData, 'tool' | 'arguments' | 'settings'>, b: Pick<CallJobData, 'tool' | 'arguments' | 'settings'>): string[] {
  const out: string[] = [];
  if (a.tool !== b.tool) out.push('tool');
  out.push(...fieldDifferences('arguments', a.arguments, b.arguments));
  out.push(...fieldDifferences('settings', a.settings, b.settings));
  return out;
}

function fieldDifferences(name: string, a: unknown, b: unknown): string[] {
  const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);
  if (!isObject(a) || !isObject(b)) return canonicalJson(a ?? {}) === canonicalJson(b ?? {}) ? [] : [name];
  const fields = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  return fields.filter((f) => canonicalJson(a[f]) !== canonicalJson(b[f])).map((f) => `${name}.${f}`);
}
