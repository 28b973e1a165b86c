import type { PlanLimits } from '../policy/plan-limits.ts';
import type { ChildRequest, DbTarget, ExecRequest, WireRequest } from './executor-protocol.ts';

/**
 * Targets one child keeps at most. Past it the worker starts numbering again from 0, sending
 * each target whole once more, and the child overwrites its slots: neither side grows with the
 * number of databases.
 */
export const TARGET_SLOTS = 1024;

/** Whether the child's copy `kept` still says what `now` says: the same file, shard and plan's limits. */
function same(kept: DbTarget, now: DbTarget): boolean {
  return kept === now || (kept.id === now.id && kept.shard === now.shard && sameLimits(kept.limits, now.limits));
}

/** Every limit alike (a new one added to `PlanLimits` is compared without a change here). */
function sameLimits(a: PlanLimits, b: PlanLimits): boolean {
  if (a === b) return true;
  for (const k in a) if (a[k as keyof PlanLimits] !== b[k as keyof PlanLimits]) return false;
  return true;
}

/**
 * The worker's half: which databases one child was sent whole, each under a number. A request's
 * `DbTarget` (id, absolute path, shard, plan's limits: ~200 bytes) went with every request,
 * serialised by the worker and parsed by the child, where the rest of a PK read is ~100 (issue
 * 31, 64 in flight): now it goes whole the first time a child is sent that database, and again
 * whenever any part of it changed (a plan's limits), and as its number otherwise. One per child
 * in place (`ExecutorProcess`): a new child (a restart, the spare taking over) starts with none.
 * The channel keeps the order of messages, so a number is always read after its target.
 */
export class SentTargets {
  private readonly byPath = new Map<string, { ref: number; target: DbTarget }>();
  private next = 0;

  /** Request `id`'s message: `req` with its target as the child's number when the child has it already. */
  message(id: number, req: ExecRequest, reopen: boolean): ChildRequest {
    const message: ChildRequest = reopen ? { id, req, reopen } : { id, req };
    if (!('db' in req)) return message;
    const target = req.db;
    const known = this.byPath.get(target.path);
    if (known && same(known.target, target)) {
      message.req = { ...req, db: known.ref } as WireRequest;
      return message;
    }
    // A changed target keeps its number (the child overwrites it); a new one takes the next.
    let ref = known?.ref;
    if (ref === undefined) {
      if (this.next === TARGET_SLOTS) {
        this.byPath.clear();
        this.next = 0;
      }
      ref = this.next++;
    }
    this.byPath.set(target.path, { ref, target });
    message.ref = ref;
    return message;
  }

  /** Forgets every target (a new child keeps none). */
  clear(): void {
    this.byPath.clear();
    this.next = 0;
  }
}

/** The child's half: the targets it was sent whole, by the number the worker gave each. */
export class KeptTargets {
  private readonly slots: (DbTarget | undefined)[] = [];

  /**
   * The request as the worker made it, its target whole: kept under the message's number when
   * sent whole, read from it when sent as a number. Undefined for a number this child was never
   * sent (a bug: the request cannot run).
   */
  resolve(message: ChildRequest): ExecRequest | undefined {
    const req = message.req;
    if (!('db' in req)) return req as ExecRequest;
    if (typeof req.db === 'number') {
      const target = this.slots[req.db];
      if (!target) return undefined;
      // The parsed message is this child's own: its target is set in place, not copied.
      (req as { db: DbTarget | number }).db = target;
      return req as ExecRequest;
    }
    if (message.ref !== undefined && message.ref >= 0 && message.ref < TARGET_SLOTS) this.slots[message.ref] = req.db;
    return req as ExecRequest;
  }
}
