import { z } from 'zod';
import { grantLevel } from './grant-scope.ts';
import { memberCaller } from './name-pattern.ts';
import { agentName, callerName, workspaceName } from './names.ts';
import { agentSettings, type AgentSettingsInput, type Plan } from './settings.ts';

/**
 * Call ids are BullMQ job ids, so they may not be plain integers or hold ':'; a runtime may
 * pass its own to make an enqueue idempotent.
 */
export const callId = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,128}$/, 'callId must be 1 to 128 of A-Z, a-z, 0-9, _ and -')
  .refine((s) => !/^\d+$/.test(s), 'callId must not be a plain integer');

/**
 * MAX_CALL_BYTES' default: the most a call's arguments may take as JSON (UTF-8), params
 * included. Each param had no size limit of its own, and a 30 MB one was kept for a week.
 */
export const DEFAULT_MAX_CALL_BYTES = 1024 * 1024;

/**
 * The size of a call's arguments as JSON, in UTF-8 bytes, as they would be stored in Redis; or
 * undefined when they are not JSON at all (a BigInt, a cycle).
 */
export function argumentBytes(args: unknown): number | undefined {
  try {
    return Buffer.byteLength(JSON.stringify(args ?? {}) ?? '', 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * A person's client as the caller of a call: the member and the role their key carries, and,
 * for a client signed in with OAuth, how far the person's grant reaches (`granted`; absent: as
 * far as the role). `since`: the member record's creation (`Member.createdAt`), which binds the
 * call to this person, not to the name (see `callKey`); absent on calls made before it was.
 */
export const memberOfCall = z.strictObject({
  name: agentName,
  role: z.enum(['member', 'admin']),
  granted: grantLevel.optional(),
  since: z.number().int().nonnegative().optional(),
});
export type MemberOfCall = z.output<typeof memberOfCall>;

/**
 * One tool call as it is enqueued: by an agent's runtime (`agent` is the agent, `settings` its
 * own), or on behalf of a person's client (`member` set, `agent` is `@<member>` and settings
 * do not apply: a person is fenced by role).
 */
export const callRequest = z
  .strictObject({
    callId: callId.optional(),
    workspace: workspaceName,
    agent: callerName,
    member: memberOfCall.optional(),
    /** A db_query call: its statement is judged by db_query's rules (introspection PRAGMAs too). */
    introspect: z.literal(true).optional(),
    settings: agentSettings.prefault({}),
    tool: z.string().min(1).max(64),
    arguments: z.unknown().optional(),
  })
  .refine((r) => (r.member ? r.agent === memberCaller(r.member.name) : !r.agent.startsWith('@')), {
    error: 'agent must be an agent name; "@<member>" only names a member\'s own calls',
    path: ['agent'],
  });

/** What a caller passes to `client.call()`. */
export interface CallInput {
  /** Names the call for its whole life: send it again under the same id and it runs at most once. Absent, the client makes one. */
  callId?: string;
  /** The workspace the call is made in. */
  workspace: string;
  /** The agent the call is made as (its slug), or `@<member>` for a person's call. */
  agent: string;
  /** The agent's settings (database, approval, sandbox, sharedData); absent, every one takes its default (`database: "off"`: no database tools). */
  settings?: AgentSettingsInput;
  /** Set when a person's client calls; `agent` is then `@<member>` (see `memberCaller`). */
  member?: MemberOfCall;
  /** Set by the db_* surface for db_query (see `translateDbCall`). */
  introspect?: true;
  /**
   * The agent key the call was made with (HTTP, MCP). A parked call made with a key is checked
   * again against the key and the agent's registered settings when it is released.
   */
  keyId?: string;
  /**
   * With `keyId`: the key's agent registration's creation (`RegisteredAgent.createdAt`), which the
   * call is keyed by (see `callKey`): an agent removed and registered again under its name is
   * another, who starts with no call ids taken.
   */
  agentSince?: number;
  /** The tool to call: a DATA_* tool name (`TOOL_NAMES`). */
  tool: string;
  /** The tool's arguments, checked against its input schema before the call is queued. */
  arguments?: unknown;
}

/** A call after its envelope (not yet its arguments) has been validated. */
export type CallRequest = z.output<typeof callRequest>;

/** The data of a call's BullMQ job. */
export interface CallJobData {
  callId: string;
  workspace: string;
  agent: string;
  settings: CallRequest['settings'];
  member?: MemberOfCall;
  introspect?: true;
  /** The agent key the call was made with, if any (see {@link CallInput.keyId}). */
  keyId?: string;
  /** The key's agent registration, which the call is keyed by (see {@link CallInput.agentSince}). */
  agentSince?: number;
  /**
   * The workspace's plan, resolved from the registry when the call was enqueued (absent on jobs
   * of older clients: the unregistered plan). Never taken from the caller's settings.
   */
  plan?: Plan;
  tool: string;
  arguments: unknown;
  /** Epoch ms when the client enqueued it. */
  enqueuedAt: number;
  /**
   * The call id is the caller's own (claimed, see `claimCallId`), not one made up for the call:
   * the worker takes it in the call-id ledger too (`CallIdLedger`). Absent on older clients' jobs.
   */
  ownId?: true;
}
