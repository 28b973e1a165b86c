import type { Redis } from 'ioredis';
import { keysFor } from '../redis/keys.ts';
import { AgentRegistry } from '../registry/agents.ts';
import { MemberRegistry } from '../registry/members.ts';
import { ApprovalService } from './approval-service.ts';

// What removing an agent ends at once, beside its keys: its parked calls (`agentdb agents remove`).
// Members' calls never park (approval-rule.ts): a revoked member has none to withdraw.

/** How many of the caller's pending approvals are read per step: each is rejected in turn. */
const STEP = 100;

/** Who decides a withdrawn call's approval: no member, so no member name (those are `[a-z0-9_-]`) can be it. */
const WITHDRAWN_BY = '(operator)';

/** Where the registries and approvals live. */
export interface RemovalPlace {
  prefix: string;
  shardCount: number;
}

/**
 * Unregisters agent `slug` of `workspace` (its keys stop working) and rejects its parked calls
 * ({@link withdrawParked}), registered or not: a removal killed between its two steps left the
 * agent unregistered and its calls pending, and run again it found nothing to remove and
 * rejected none, so a person's approval of a runtime's call by the name still ran it (hostile
 * review T5). @returns `removed` false when it was not registered.
 */
export async function removeAgent(redis: Redis, place: RemovalPlace, workspace: string, slug: string): Promise<{ removed: boolean; withdrawn: number }> {
  const keys = keysFor(place.prefix);
  const removed = await new AgentRegistry(redis, keys).remove(workspace, slug);
  const reason = `agent ${slug} was removed from ${workspace} (agentdb agents remove): nothing it parked runs`;
  return { removed, withdrawn: await withService(redis, place, (s) => withdrawParked(s, workspace, slug, reason)) };
}

async function withService<T>(redis: Redis, place: RemovalPlace, fn: (service: ApprovalService) => Promise<T>): Promise<T> {
  const service = new ApprovalService({ redis, prefix: place.prefix, shardCount: place.shardCount, members: new MemberRegistry(redis, keysFor(place.prefix)) });
  try {
    return await fn(service);
  } finally {
    await service.close();
  }
}

/**
 * Rejects every pending approval of agent `caller` in `workspace` with `reason` (made with its
 * keys or by a runtime calling by its name: fail-closed, the name's calls alike), and wakes each
 * parked call, which finishes APPROVAL_REJECTED ("Rejected by (operator): <reason>") and writes
 * its audit row. A removed agent's parked writes and drops stayed pending, and a person's approval
 * of one made by a runtime ran what was asked of the removed registration (session 28, L1).
 * Nothing such a call asked runs once its agent is gone, and a decision arriving after this one
 * meets APPROVAL_CONFLICT. A call made with its key that parks after this (in flight at the
 * removal) is refused when released (`standingRefusal`: the key's agent is gone).
 * @returns how many were rejected.
 */
async function withdrawParked(service: ApprovalService, workspace: string, caller: string, reason: string): Promise<number> {
  let rejected = 0;
  for (;;) {
    const { approvals } = await service.page({ workspace, state: 'pending', offset: 0, limit: STEP, filter: { agent: caller } });
    let decided = 0;
    for (const a of approvals) {
      // Decided by someone else meanwhile (or expired): theirs stands.
      if ((await service.store.transition(a.id, 'rejected', WITHDRAWN_BY, reason, 'operator')) !== 'OK') continue;
      const now = await service.store.get(a.id);
      if (now) await service.announce(now);
      decided++;
    }
    rejected += decided;
    // A page with nothing left to decide (each decided meanwhile) would be read again unchanged.
    if (approvals.length < STEP || decided === 0) return rejected;
  }
}
