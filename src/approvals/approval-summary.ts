import type { Approval } from './approval.ts';

/** What events and parked answers say of an approval. */
export function summary(a: Approval): Record<string, unknown> {
  return {
    id: a.id,
    callId: a.callId,
    state: a.state,
    tier: a.tier,
    workspace: a.workspace,
    agent: a.agent,
    tool: a.tool,
    database: a.database,
    expiresAt: new Date(a.expiresAt).toISOString(),
    ...(a.object ? { object: { type: a.object.type, name: a.object.name, definition: a.object.definition, rows: a.object.rows } } : {}),
    ...(a.decidedBy ? { decidedBy: a.decidedBy, decidedAt: new Date(a.decidedAt!).toISOString() } : {}),
    ...(a.decidedVia ? { decidedVia: a.decidedVia } : {}),
    ...(a.reason ? { reason: a.reason } : {}),
    // What the call would change: the person's reason to approve, and what the caller is told it waits on.
    ...(a.effect !== undefined ? { effect: a.effect } : {}),
    ...(a.effectNote ? { effectNote: a.effectNote } : {}),
    ...(a.supersedes ? { supersedes: a.supersedes } : {}),
    ...(a.supersededBy ? { supersededBy: a.supersededBy } : {}),
  };
}
