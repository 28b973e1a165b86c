import { randomBytes } from 'node:crypto';
import type { ChainableCommander, Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';
import { withScripts, type LuaCommands, type ScriptedRedis } from '../redis/lua-scripts.ts';
import { approvalIdFor, MAX_APPROVAL_ROUNDS, type Approval, type ApprovalRequest, type ApprovalState, type DecisionChannel } from './approval.ts';
import { parseApproval } from './approval-hash.ts';
import { ApprovalPages } from './approval-pages.ts';

/** How an attempted transition ended. */
export type TransitionResult = Awaited<ReturnType<LuaCommands['agentdbApprovalTransition']>>;

/**
 * Approval records in Redis: one hash per approval (the request as asked, its state and
 * decision), an index of pending ones by expiry and of all by creation. With Redis persistence
 * on, they survive restarts of every process and of Redis itself; they are the decision audit.
 */
export class ApprovalStore {
  private readonly redis: ScriptedRedis;
  /**
   * The reads of many approvals at once: {@link ApprovalPages.list}, `scan`, `page` and
   * `pendingByDatabase` (approval-pages.ts), each reading a workspace's own index.
   */
  readonly pages: ApprovalPages;

  constructor(
    redis: Redis,
    private readonly keys: Keys,
  ) {
    // Idempotent creation and the first-decision-wins transition are scripts (approval-create.lua,
    // approval-transition.lua), judged by Redis's own clock.
    this.redis = withScripts(redis);
    this.pages = new ApprovalPages(this.redis, keys);
  }

  /**
   * Records a parked call, or returns the record already made for it (`created: false`): a
   * worker that died while parking parks again after a retry.
   */
  async create(request: ApprovalRequest): Promise<{ approval: Approval; created: boolean }> {
    const { keys } = this;
    const created = await this.redis.agentdbApprovalCreate(
      keys.approval(request.id),
      keys.approvalsPending,
      keys.approvalsAll,
      keys.approvalsPendingOf(request.workspace),
      keys.approvalsAllOf(request.workspace),
      keys.approvalsExpiringOf(request.workspace),
      JSON.stringify(request),
      request.workspace,
      request.createdAt,
      request.expiresAt,
      request.id,
      request.agent,
      request.tool,
      request.database,
    );
    return { approval: (await this.get(request.id))!, created: created === 1 };
  }

  /** One approval, or undefined. */
  async get(id: string): Promise<Approval | undefined> {
    return parseApproval(await this.redis.hgetall(this.keys.approval(id)));
  }

  /**
   * Moves a pending approval to `state`. `approved` and `rejected` fail once it expired;
   * `expired` succeeds only once the expiry has passed. With `decider` (a member's `deciderId`),
   * refused as REVOKED once that member's revoke began.
   */
  async transition(
    id: string,
    state: Exclude<ApprovalState, 'pending'>,
    by = '',
    reason = '',
    via: DecisionChannel | '' = '',
    decider = '',
  ): Promise<TransitionResult> {
    // An approval's workspace never changes, so reading it before the script races nothing; a
    // missing record answers NOT_FOUND before the script touches either workspace index.
    const workspace = (await this.redis.hget(this.keys.approval(id), 'workspace')) ?? '';
    const { keys } = this;
    return this.redis.agentdbApprovalTransition(
      keys.approval(id),
      keys.approvalsPending,
      keys.approvalsPendingOf(workspace),
      keys.approvalsDecidedOf(workspace),
      keys.approvalsExpiringOf(workspace),
      keys.decisionsUndelivered,
      keys.revokedDeciders,
      state,
      by,
      reason,
      id,
      via,
      decider,
    );
  }

  /**
   * Queues on `multi` the mark that the decision's `approval.decided` event is on the stream, for
   * the transaction that appends it (see `ApprovalService.announce`).
   */
  markAnnounced(multi: ChainableCommander, id: string): ChainableCommander {
    return multi.hset(this.keys.approval(id), 'announced', '1');
  }

  /** Records that the decision is announced and its call woken: nothing of it is owed any more (see `undeliveredDecisions`). */
  async delivered(id: string): Promise<void> {
    await this.redis.zrem(this.keys.decisionsUndelivered, id);
  }

  /**
   * Up to `limit` decisions recorded `afterMs` ago or more and not yet delivered, each held
   * `holdMs` for this caller (decisions-claim.lua); one not delivered by then is claimable again.
   */
  claimUndelivered(afterMs: number, holdMs: number, limit: number): Promise<string[]> {
    return this.redis.agentdbDecisionsClaim(this.keys.decisionsUndelivered, afterMs, holdMs, limit);
  }

  /**
   * Queues on `multi` the mark that the approval's `approval.requested` event is on the stream,
   * for the transaction that appends it (see `CallParking.requested`).
   */
  markRequested(multi: ChainableCommander, id: string): ChainableCommander {
    return multi.hset(this.keys.approval(id), 'requested', '1');
  }

  /** Whether the approval's `approval.requested` event is on the stream (false too for one made before the mark existed). */
  async requestedAnnounced(id: string): Promise<boolean> {
    return (await this.redis.hexists(this.keys.approval(id), 'requested')) === 1;
  }

  /** Whether the decision's `approval.decided` event is on the stream. */
  async announced(id: string): Promise<boolean> {
    return (await this.redis.hexists(this.keys.approval(id), 'announced')) === 1;
  }

  /**
   * The approval that stands for a call now: its first (derived from its key), or, once that was
   * superseded, the one after it (derived from the key and the round, never read from a record),
   * and so on. Undefined when the call has none.
   */
  async current(key: string): Promise<Approval | undefined> {
    let epoch = await this.epoch();
    let approval = await this.get(approvalIdFor(key, 1, epoch));
    if (!approval) {
      // Parked before approval ids carried an epoch.
      epoch = '';
      approval = await this.get(approvalIdFor(key));
    }
    for (let round = 2; approval?.state === 'superseded' && round <= MAX_APPROVAL_ROUNDS; round++) {
      const next = await this.get(approvalIdFor(key, round, epoch));
      if (!next) break;
      approval = next;
    }
    return approval;
  }

  /**
   * This Redis's approval epoch: made once (SET NX) the first time it is asked, so every process
   * reads the same one, and made anew when Redis comes back empty. Read each time, not kept in
   * memory: a process that kept it would go on deriving the lost epoch's ids.
   */
  async epoch(): Promise<string> {
    const kept = await this.redis.get(this.keys.approvalEpoch);
    if (kept) return kept;
    await this.redis.set(this.keys.approvalEpoch, randomBytes(9).toString('base64url'), 'NX');
    return (await this.redis.get(this.keys.approvalEpoch)) ?? '';
  }

  /**
   * Marks an approved approval `superseded` by `by`: its call did not run, because its effect
   * changed. Only the worker running the call does this, holding its job, so no other writer races it.
   */
  async supersede(id: string, by: string): Promise<void> {
    await this.redis.hset(this.keys.approval(id), 'state', 'superseded', 'supersededBy', by);
  }

  /** Records how an approved call ended when it ran. */
  async recordRun(id: string, ran: NonNullable<Approval['ran']>): Promise<void> {
    await this.redis.hset(this.keys.approval(id), 'ran', JSON.stringify(ran));
  }
}
