import type { Redis } from 'ioredis';
import { ApprovalService, type DecideResult } from '../approvals/approval-service.ts';
import { MemberRegistry } from '../registry/members.ts';
import type { Keys } from '../redis/keys.ts';
import type { Decision } from './call-answers.ts';
import type { ClientShardCount } from './client-shard-count.ts';
import { decideUnanswered, type OutageAnswers } from './outage-answers.ts';

/**
 * The client's side of approvals: deciding one (as a member by key, or as the operator), bounded
 * by Redis's outages as every client request is, and reading the approval a parked call waits
 * on. The approval service is made on first use: a runtime that never meets an approval never
 * opens it.
 */
export class ClientApprovals {
  private service?: ApprovalService;

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    /** The client's shard count; the service is made after the client's first look at it. */
    private readonly shards: ClientShardCount,
    private readonly outage: OutageAnswers,
    private readonly redisUrl: string,
  ) {}

  /**
   * Decides as the member whose `key` this is, or, with `operator: true`, as the member named
   * `by` on the word of the trusted runtime (see `AgentDbClient.decide`). A Redis that is down,
   * or connected but answering nothing, answers UNAVAILABLE within its bound.
   */
  async decide(approvalId: string, d: Decision): Promise<DecideResult> {
    // A Redis that is connected but answers nothing may have recorded the decision before it stopped.
    const stall = this.outage.unanswered(() => decideUnanswered(this.redisUrl, approvalId));
    try {
      return await this.outage.answerOrUnavailable(
        async () => {
          const down = await this.outage.redisDown();
          if (down) return { ok: false, code: 'UNAVAILABLE', detail: down };
          stall.arm();
          const decided = async (): Promise<DecideResult> => {
            const shards = await this.shards.resolve();
            if (!shards.ok) return { ok: false, code: 'CONFIG_MISMATCH', detail: shards.detail };
            return this.decideNow(approvalId, d);
          };
          return Promise.race([decided(), stall.passed.then((detail): DecideResult => ({ ok: false, code: 'UNAVAILABLE', detail }))]);
        },
        (detail) => ({ ok: false, code: 'UNAVAILABLE', detail }),
      );
    } finally {
      stall.disarm();
    }
  }

  /** The decision itself, once Redis answers and the shard count is known. */
  private async decideNow(approvalId: string, d: Decision): Promise<DecideResult> {
    const input = { decision: d.decision, ...(d.reason !== undefined ? { reason: d.reason } : {}) };
    if ('key' in d) return this.approvals().decideWithKey(approvalId, d.key, input);
    if (d.operator !== true) return { ok: false, code: 'INVALID_ARGUMENTS', detail: 'Deciding by name takes operator: true; a member decides with their key.' };
    return this.approvals().decideAsOperator(approvalId, { ...input, by: d.by });
  }

  /** The approval service, made on first use. */
  approvals(): ApprovalService {
    this.service ??= new ApprovalService({
      redis: this.redis,
      prefix: this.keys.bullPrefix,
      shardCount: this.shards.current,
      members: new MemberRegistry(this.redis, this.keys),
    });
    return this.service;
  }

  async close(): Promise<void> {
    await this.service?.close();
  }
}
