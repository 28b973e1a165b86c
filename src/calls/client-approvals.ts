import type { Redis } from 'ioredis';
import { ApprovalService, type DecideResult } from '../approvals/approval-service.ts';
import { MemberRegistry } from '../registry/members.ts';
import type { Keys } from '../redis/keys.ts';
import type { Decision } from './call-answers.ts';

/**
 * The client's side of approvals: deciding one (as a member by key, or as the operator), and
 * reading the approval a parked call waits on. The approval service is made on first use: a
 * runtime that never meets an approval never opens it.
 */
export class ClientApprovals {
  private service?: ApprovalService;

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    /** The client's shard count as now known; the service is made after the client's first look at it. */
    private readonly shardCount: () => number,
  ) {}

  /**
   * Decides as the member whose `key` this is, or, with `operator: true`, as the member named
   * `by` on the word of the trusted runtime.
   */
  async decide(approvalId: string, d: Decision): Promise<DecideResult> {
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
      shardCount: this.shardCount(),
      members: new MemberRegistry(this.redis, this.keys),
    });
    return this.service;
  }

  async close(): Promise<void> {
    await this.service?.close();
  }
}
