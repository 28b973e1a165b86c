import { INLINE_ENVELOPE_BYTES } from '../redis/events.ts';
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

/**
 * What an approval event on the stream says of an approval: its {@link summary}, but the effect's
 * rows by reference (`effectByReference: true`: read the approval for them) when they would make
 * it larger than an inline envelope ({@link INLINE_ENVELOPE_BYTES}). The stream is the service's
 * and keeps ~20,000 events, bounded at ~320 MB by that cap on completions; an approval's effect
 * may take MAX_PARKED_CALL_BYTES (64 KiB), and each approval is published twice (requested,
 * decided): 58 KB of JSON an event, 63 KB of the stream, in no workspace's budget (session 34, T12).
 */
export function eventSummary(a: Approval): Record<string, unknown> {
  const whole = summary(a);
  if (whole.effect === undefined || Buffer.byteLength(JSON.stringify(whole)) <= INLINE_ENVELOPE_BYTES) return whole;
  const { effect: _, ...rest } = whole;
  return { ...rest, effectByReference: true };
}
