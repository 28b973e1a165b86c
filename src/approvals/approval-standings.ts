import type { Redis } from 'ioredis';
import type { CallJobData } from '../contracts/call.ts';
import { standingRefusal } from '../policy/standing-refusal.ts';
import type { Keys } from '../redis/keys.ts';
import { AgentKeyRing } from '../registry/agent-keys.ts';
import { AgentRegistry } from '../registry/agents.ts';
import type { Approval } from './approval.ts';

/**
 * Whether a pending approval's call would be refused if approved now: its agent key revoked, its
 * agent removed or narrowed since it was parked. The same judgement the worker makes at release
 * (`standingRefusal`), made before anyone decides.
 */
export class ApprovalStandings {
  private readonly ring: AgentKeyRing;

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly shardCount: number,
  ) {
    this.ring = new AgentKeyRing(redis, keys, new AgentRegistry(redis, keys));
  }

  /** For each pending approval of `approvals` whose call would be refused if approved now, why. */
  async of(approvals: Approval[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    await Promise.all(
      approvals
        .filter((a) => a.state === 'pending')
        .map(async (a) => {
          // The parked job's data, read from its hash as BullMQ keeps it: loading BullMQ for a
          // listing cost `approvals list` more than all the rest of its start.
          const data = await this.redis.hget(this.keys.job(a.shard, a.callKey), 'data');
          if (data === null) return;
          // The call was admitted with its size checked; only where it may go is judged again.
          const why = await standingRefusal(
            this.ring,
            { shardCount: this.shardCount, maxCallBytes: Number.MAX_SAFE_INTEGER },
            JSON.parse(data) as CallJobData,
            a.database,
          );
          if (why) out.set(a.id, why);
        }),
    );
    return out;
  }
}

/**
 * An approval as listed (CLI `--json`, `GET /v1/approvals`), with `refusedIfApproved` when its
 * call would be refused if approved now (see {@link ApprovalStandings.of}).
 */
export function withRefusal(a: Approval, refusals: ReadonlyMap<string, string>): Approval & { refusedIfApproved?: string } {
  const why = refusals.get(a.id);
  return why ? { ...a, refusedIfApproved: why } : a;
}
