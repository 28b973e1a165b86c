import type { ApprovalService } from './approval-service.ts';

/** Decisions delivered per round at most: each is a few Redis commands, on a worker's tick. */
const MAX_PER_ROUND = 50;

/** How long a claimed decision is held for its claimer before another worker may take it. */
const HOLD_MS = 60_000;

/**
 * Finishes the delivery of people's decisions whose decider recorded them and then died, or lost
 * Redis, before it announced them and woke their calls (`ApprovalService.announce`). Such a call
 * slept until its approval's expiry (24 h by default) and only then ran, no `approval.decided`
 * was ever published, and the person sending the decision again was told APPROVAL_CONFLICT
 * (session 34, D1: an API process SIGKILLed, or Redis killed, between the two). Each worker runs
 * it on its tick; a decision is taken once `afterMs` has passed since it was recorded, so a
 * decider still at work finishes its own. Returns how many it took.
 */
export async function deliverDecisions(service: ApprovalService, afterMs: number): Promise<number> {
  const { store } = service;
  const ids = await store.claimUndelivered(afterMs, HOLD_MS, MAX_PER_ROUND);
  for (const id of ids) {
    const approval = await store.get(id);
    if (approval?.state !== 'approved' && approval?.state !== 'rejected') {
      // Gone, or already past its decision (superseded by its run): nothing is owed.
      await store.delivered(id);
      continue;
    }
    if (await store.announced(id)) await service.wake(approval);
    else await service.announce(approval);
  }
  return ids.length;
}
