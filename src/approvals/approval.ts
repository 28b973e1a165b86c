import { createHash } from 'node:crypto';
import { digestOf } from '../contracts/call-identity.ts';
import type { DropObject } from '../contracts/drop-object.ts';
import type { Effect } from '../contracts/effect.ts';

export type { DropObject, Effect };

/**
 * Where an approval stands. `pending` is the only state a decision may leave; `superseded` is an
 * approved call whose effect changed before it ran: nothing ran, and a new approval (its
 * `supersededBy`) asks about the effect it has now.
 */
export type ApprovalState = 'pending' | 'approved' | 'rejected' | 'expired' | 'superseded';

/** Every state, as lists and filters name them. */
export const APPROVAL_STATES: readonly ApprovalState[] = ['pending', 'approved', 'rejected', 'expired', 'superseded'];

/** How a decision was made: with a member's own key, or named by a trusted operator. */
export type DecisionChannel = 'key' | 'operator';

/** What a person is asked about: one parked call, as it will run if approved. */
export interface ApprovalRequest {
  /** Derived from the call's key ({@link approvalIdFor}): one approval per call, never shared. */
  id: string;
  /** The caller's own call id. */
  callId: string;
  /** Workspace, agent and call id: the call this approval belongs to (see `callKey`). */
  callKey: string;
  /**
   * sha256 of what runs if approved: workspace, agent, database, tool, SQL, params, table and
   * tier ({@link approvalDigest}). A parked call runs only if its own digest still matches.
   */
  digest: string;
  shard: number;
  workspace: string;
  /** The agent that made the call (the requester). */
  agent: string;
  tool: string;
  tier: 'write' | 'destructive';
  /** The database the call reaches: `<workspace>` or `<workspace>/<agent>`. */
  database: string;
  /** True when it reaches the workspace's shared tables (a shared drop takes an admin). */
  shared: boolean;
  sql?: string;
  params?: unknown[];
  table?: string;
  rationale?: string;
  /** For a drop: the object as it was when the call was parked. */
  object?: DropObject;
  /**
   * What it would change, computed when it was parked (see `Effect`); the call commits only with
   * this effect's digest. Null when it could not be computed (`effectNote` says why): the call
   * then commits only if it changes no rows, else parks again with the effect it has; absent on
   * approvals made before effects were, and on calls that change no rows of their own (a drop of a view).
   */
  effect?: Effect | null;
  /** Why `effect` is null, or what changed since the approval this one supersedes. */
  effectNote?: string;
  /** 1 for a call's first approval, 2 for the one that superseded it, and so on. */
  round?: number;
  /** The approval this one replaced, when the data changed after it was approved. */
  supersedes?: string;
  requester: string;
  createdAt: number;
  expiresAt: number;
}

/** An approval with its decision and, once run, what ran. */
export interface Approval extends ApprovalRequest {
  state: ApprovalState;
  decidedBy?: string;
  decidedAt?: number;
  /** How the decider proved who they are. */
  decidedVia?: DecisionChannel;
  reason?: string;
  /** For a `superseded` approval: the approval that asks about the call's effect now. */
  supersededBy?: string;
  /**
   * How the approved call ended when it ran; `detail` says why when it was refused at release
   * (its agent narrowed, its key revoked, the agent removed since it was parked); `message` is
   * the error's message when it ran and failed (SQLite's "no such table: leads"), so whoever
   * approved sees why without asking for the call's result. Only `detail` marks a refusal.
   */
  ran?: { ok: boolean; code?: string; detail?: string; message?: string; at: number };
}

/**
 * The approval id of a call, from its key (`callKey`): the worker derives it from the job's own
 * identity, never reads it from job data, so no job can point itself at another call's approval.
 * Hashed, so the id reveals neither workspace nor agent. `round`: a call's approvals after the
 * first (each superseded one's next) are derived from its key and the round; a key holds no
 * newline (names and call ids are [A-Za-z0-9_-]), so no round's id is another key's.
 * `epoch`: the store's (see above); empty for ids made before epochs.
 */
export function approvalIdFor(key: string, round = 1, epoch = ''): string {
  const byRound = round === 1 ? key : `${key}\n${round}`;
  // The epoch (`ApprovalStore.epoch`) is new each time Redis starts empty: a call parked again
  // after Redis lost its approvals gets a new id, so a decision of the old one (a retried request,
  // a stale inbox card) cannot approve what the call would do now. '' derives the ids made
  // before epochs existed.
  const named = epoch ? `${epoch}\n${byRound}` : byRound;
  return `ap_${createHash('sha256').update(named).digest('base64url').slice(0, 24)}`;
}

/** Rounds a call's approvals may go through: each one a person approved whose data changed before it ran. */
export const MAX_APPROVAL_ROUNDS = 100;

/** What an approval is bound to: everything that decides what runs. */
export function approvalDigest(a: Pick<ApprovalRequest, 'workspace' | 'agent' | 'database' | 'tool' | 'tier' | 'sql' | 'params' | 'table'>): string {
  return digestOf([a.workspace, a.agent, a.database, a.tool, a.tier, a.sql ?? null, a.params ?? [], a.table ?? null]);
}
