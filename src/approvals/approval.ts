/** Where an approval stands. `pending` is the only state a decision may leave. */
export type ApprovalState = 'pending' | 'approved' | 'rejected' | 'expired';

/** What a person is asked about: one parked call, as it will run if approved. */
export interface ApprovalRequest {
  /** `ap_<callId>`: one approval per call, found again from the call alone. */
  id: string;
  callId: string;
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
  requester: string;
  createdAt: number;
  expiresAt: number;
}

/** An approval with its decision and, once run, what ran. */
export interface Approval extends ApprovalRequest {
  state: ApprovalState;
  decidedBy?: string;
  decidedAt?: number;
  reason?: string;
  /** How the approved call ended when it ran. */
  ran?: { ok: boolean; code?: string; at: number };
}

/** The approval id of a call. */
export function approvalIdFor(callId: string): string {
  return `ap_${callId}`;
}

/** The call id of an approval id, or undefined when it is not one. */
export function callIdOfApproval(id: string): string | undefined {
  return id.startsWith('ap_') && id.length > 3 ? id.slice(3) : undefined;
}
