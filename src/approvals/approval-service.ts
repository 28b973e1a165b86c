import type { Redis } from 'ioredis';
import type { ErrorCode } from '../errors.ts';
import { appendEvent, execEvent } from '../redis/events.ts';
import { keysFor, type Keys } from '../redis/keys.ts';
import type { ShardQueues } from '../redis/shard-queues.ts';
import { deciderId, NOT_A_MEMBER_KEY } from '../registry/members.ts';
import type { Approval, ApprovalState, DecisionChannel } from './approval.ts';
import { listedApproval, MAX_LIST_PAGE, type ListCursor, type ListedApproval } from './approval-listing.ts';
import { ApprovalStandings, withRefusal } from './approval-standings.ts';
import { eventSummary } from './approval-summary.ts';
import { ApprovalStore } from './approval-store.ts';
import type { ApprovalPages, ApprovalScan } from './approval-pages.ts';

/** A person deciding: a member of a workspace, with a role. */
export interface Decider {
  workspace: string;
  name: string;
  role: 'member' | 'admin';
  /** When the member was added: a name revoked and added again since is another member. */
  createdAt?: number;
}

/** Finds an active member by name or by key (the members registry). */
export interface MemberLookup {
  get(workspace: string, name: string): Promise<Decider | undefined>;
  authenticate(key: string): Promise<Decider | undefined>;
}

/** A decision as asked. */
export interface DecisionInput {
  decision: 'approve' | 'reject';
  reason?: string;
}

/** How a decision ended. */
export type DecideResult = { ok: true; approval: Approval } | { ok: false; code: ErrorCode; detail: string };

/** One id's outcome in a bulk decision. */
export type BulkDecision = { id: string; ok: true; approval: Approval } | { id: string; ok: false; code: ErrorCode; detail: string };

/** How a bulk decision ended: refused whole (too many ids, none), or each id's outcome in order. */
export type BulkDecideResult = { ok: true; results: BulkDecision[] } | { ok: false; code: ErrorCode; detail: string };

/** Most approvals one bulk decision names: a request's work stays bounded (each is a Redis transition, an event and a release). */
export const MAX_BULK_DECISIONS = 50;

/** Longest reason kept with a decision. */
export const MAX_REASON_LENGTH = 2000;

const refuse = (code: ErrorCode, detail: string): { ok: false; code: ErrorCode; detail: string } => ({ ok: false, code, detail });

/**
 * The one code path for people's decisions, used by the client library, the CLI and HTTP
 * alike: who may decide, the first decision wins, and the parked call is released to run
 * (approve) or to finish with the rejection. Expiry is the worker's, at the approval's deadline.
 */
export class ApprovalService {
  readonly store: ApprovalStore;
  private readonly keys: Keys;
  private readonly redis: Redis;
  /** Opened on the first decision: BullMQ (144 modules, ~0.1 s of CPU to load) only wakes a parked job. */
  private queues?: Promise<ShardQueues>;
  private standing?: ApprovalStandings;

  constructor(private readonly opts: { redis: Redis; prefix: string; shardCount: number; members: MemberLookup }) {
    this.redis = opts.redis;
    this.keys = keysFor(opts.prefix);
    this.store = new ApprovalStore(opts.redis, this.keys);
  }

  /** One approval, or undefined. */
  get(id: string): Promise<Approval | undefined> {
    return this.store.get(id);
  }

  /** The approval that stands for a call now (its latest round: see `ApprovalStore.current`). */
  current(callKey: string): Promise<Approval | undefined> {
    return this.store.current(callKey);
  }

  /** Approvals, newest first; pending ones unless `state` says otherwise. */
  list(filter: { workspace?: string; state?: ApprovalState | 'all'; limit?: number } = {}): Promise<Approval[]> {
    return this.store.pages.list(filter);
  }

  /** A list page of a workspace's approvals after `cursor` (see `ApprovalPages.scan`), big fields cut (see `listedApproval`). */
  async scan(filter: ApprovalScan): Promise<{ approvals: (ListedApproval & { refusedIfApproved?: string })[]; next?: ListCursor }> {
    const { approvals, next } = await this.store.pages.scan({ ...filter, limit: Math.min(filter.limit, MAX_LIST_PAGE) });
    const refusals = await this.standings(approvals);
    return { approvals: approvals.map((a) => listedApproval(withRefusal(a, refusals))), ...(next ? { next } : {}) };
  }

  /** One page of a workspace's pending or decided approvals, newest first, narrowed by `filter` (see `ApprovalPages.page`). */
  page(filter: Parameters<ApprovalPages['page']>[0]): ReturnType<ApprovalPages['page']> {
    return this.store.pages.page(filter);
  }

  /** How many of a workspace's approvals wait for a decision, by database (the Data page's figure). */
  pendingByDatabase(workspace: string, onRead?: (entries: number) => void): Promise<Map<string, number>> {
    return this.store.pages.pendingByDatabase(workspace, onRead);
  }

  /**
   * Several decisions with one reason: each id decided through {@link decide} in turn, so each is
   * bound to its own effect and digest and judged on its own (one decided meanwhile by someone
   * else answers APPROVAL_CONFLICT and the rest still go through; another workspace's answers
   * NOT_FOUND). Past {@link MAX_BULK_DECISIONS} ids, or with an id twice, nothing is decided.
   */
  async decideMany(ids: readonly string[], input: DecisionInput & { by: Decider; via: DecisionChannel }): Promise<BulkDecideResult> {
    if (!Array.isArray(ids) || ids.length === 0) return refuse('INVALID_ARGUMENTS', 'name at least one approval id.');
    if (ids.length > MAX_BULK_DECISIONS) {
      return refuse(
        'INVALID_ARGUMENTS',
        `at most ${MAX_BULK_DECISIONS} approvals are decided per request (${ids.length} were sent); nothing was decided: send them in smaller batches.`,
      );
    }
    if (new Set(ids).size !== ids.length) return refuse('INVALID_ARGUMENTS', 'an approval id is named twice; nothing was decided.');
    const results: BulkDecision[] = [];
    for (const id of ids) {
      const one = await this.decide(id, input);
      results.push(one.ok ? { id, ok: true, approval: one.approval } : { id, ok: false, code: one.code, detail: one.detail });
    }
    return { ok: true, results };
  }

  /**
   * For each pending approval whose call would be refused if approved now, why (see
   * `ApprovalStandings.of`): the inbox and `approvals list` show it before anyone decides.
   */
  standings(approvals: Approval[]): Promise<Map<string, string>> {
    this.standing ??= new ApprovalStandings(this.redis, this.keys, this.opts.shardCount);
    return this.standing.of(approvals);
  }

  /**
   * Decides as the member whose key this is (CLI, client library): the key is the proof, as on
   * HTTP. An unknown or revoked key answers UNAUTHENTICATED and names nothing that exists.
   */
  async decideWithKey(id: string, key: string, input: DecisionInput): Promise<DecideResult> {
    const member = await this.opts.members.authenticate(key);
    if (!member) return refuse('UNAUTHENTICATED', NOT_A_MEMBER_KEY);
    return this.decide(id, { ...input, by: member, via: 'key' });
  }

  /**
   * Decides as the member named `by`, on a trusted operator's word (an explicit CLI flag, or a
   * runtime holding Redis itself): no key proves who decided, so the audit records the channel.
   */
  async decideAsOperator(id: string, input: DecisionInput & { by: string }): Promise<DecideResult> {
    const approval = await this.store.get(id);
    if (!approval) return refuse('NOT_FOUND', `There is no approval ${JSON.stringify(id)}.`);
    const member = await this.opts.members.get(approval.workspace, input.by);
    if (!member) {
      return refuse('NOT_PERMITTED', `${JSON.stringify(input.by)} is not an active member of workspace ${approval.workspace}.`);
    }
    return this.decide(id, { ...input, by: member, via: 'operator' });
  }

  /** Decides as `by`, a member already authenticated (`via: 'key'`) or named by an operator. */
  async decide(id: string, input: DecisionInput & { by: Decider; via: DecisionChannel }): Promise<DecideResult> {
    if (input.decision !== 'approve' && input.decision !== 'reject') {
      return refuse('INVALID_ARGUMENTS', 'decision must be "approve" or "reject".');
    }
    if (input.reason !== undefined && (typeof input.reason !== 'string' || input.reason.length > MAX_REASON_LENGTH)) {
      return refuse('INVALID_ARGUMENTS', `reason must be a string of at most ${MAX_REASON_LENGTH} characters.`);
    }
    const approval = await this.store.get(id);
    const { by } = input;
    // Another workspace's approval is answered as if it did not exist: its id, SQL and state
    // are not this member's to learn.
    if (!approval || by.workspace !== approval.workspace) return refuse('NOT_FOUND', `There is no approval ${JSON.stringify(id)}.`);
    // The member as the registry has them now, not as their request found them: a key revoked (or
    // a name revoked and added again with a lower role) while a decision, or the 50 of a batch, was
    // on its way still decided, an admin's drop included (session 37, R12).
    const now = await this.opts.members.get(by.workspace, by.name);
    const gone = () => refuse('NOT_PERMITTED', `${by.name} is no longer an active member of workspace ${by.workspace}: nothing was decided.`);
    if (!now || (by.createdAt !== undefined && now.createdAt !== undefined && now.createdAt !== by.createdAt)) return gone();
    if (approval.tier === 'destructive' && approval.shared && (by.role !== 'admin' || now.role !== 'admin')) {
      return refuse('NOT_PERMITTED', 'Dropping a shared table takes a workspace admin to approve.');
    }
    const state = input.decision === 'approve' ? 'approved' : 'rejected';
    // The member this re-check found, checked again in the transition's own step: a revoke landing
    // between the two let that one decision through (session 38, R13).
    const decider = now.createdAt === undefined ? '' : deciderId(by.workspace, by.name, now.createdAt);
    const result = await this.store.transition(id, state, by.name, input.reason ?? '', input.via, decider);
    if (result === 'REVOKED') return gone();
    if (result !== 'OK') {
      const after = await this.store.get(id);
      if (result === 'EXPIRED') return refuse('APPROVAL_EXPIRED', `Approval ${id} expired at ${new Date(approval.expiresAt).toISOString()}.`);
      if (result === 'CONFLICT') {
        return refuse('APPROVAL_CONFLICT', `Approval ${id} was already ${after?.state}${after?.decidedBy ? ` by ${after.decidedBy}` : ''}.`);
      }
      return refuse('NOT_FOUND', `There is no approval ${JSON.stringify(id)}.`);
    }
    const decided = (await this.store.get(id))!;
    await this.announce(decided);
    return { ok: true, approval: decided };
  }

  /**
   * Announces a decision just made and wakes its parked call. Announced before the call is woken:
   * a runtime following the events hears the decision before the `call.completed` it causes.
   * Woken first, a quick call completed before its decision was published. The mark tells a
   * worker that finds the decision while it is still parking the call (`CallParking.sleep`) that
   * it may wake the call itself.
   */
  async announce(decided: Approval): Promise<void> {
    // One transaction: a reader that sees the event sees the mark, and a crash leaves neither or both.
    const multi = appendEvent(this.redis.multi(), this.keys.events, {
      type: 'approval.decided',
      callId: decided.callId,
      approval: eventSummary(decided),
      at: Date.now(),
    });
    await execEvent(this.store.markAnnounced(multi, decided.id));
    await this.wake(decided);
  }

  /**
   * Wakes the decided call (see {@link release}), then clears the decision from those owed
   * delivery: only then, so a decider that dies before leaves it to `deliverDecisions`.
   */
  async wake(decided: Approval): Promise<void> {
    await this.release(decided);
    await this.store.delivered(decided.id);
  }

  /**
   * The approval `id` names: itself when it is an approval's id; otherwise the approval of the
   * one call it names by its callId in the decider's workspace: that call's pending approval, else
   * its latest (asked again when its data changed, a call has several), so a second decision meets
   * the first. Call ids repeat across workspaces and agents, and an agent picks its own: an id
   * that names approvals of more than one call, in any state, is refused (the ap_… id says which).
   * Counting only pending ones, a person about to approve one agent's call `step-1`, decided by
   * someone else (or expired) meanwhile, approved another agent's `step-1` parked since, whose
   * SQL they never read (session 37, R11).
   */
  async resolveId(id: string, workspace?: string, forDecision = false): Promise<string | DecideResult> {
    const byId = await this.store.get(id);
    const asApproval = byId && (workspace === undefined || byId.workspace === workspace) ? byId : undefined;
    const named = (await this.store.pages.list({ state: 'all', ...(workspace ? { workspace } : {}) })).filter((a) => a.callId === id);
    const calls = new Map<string, Approval[]>();
    for (const a of named) calls.set(a.callKey, [...(calls.get(a.callKey) ?? []), a]);
    // A call id may look like an approval id (an agent picks it): one that names both is never
    // resolved by guessing, or an agent could point a person's decision at another call.
    const chosen = [...calls.values()].map((of) => of.find((a) => a.state === 'pending') ?? of.reduce((x, y) => (y.createdAt > x.createdAt ? y : x)));
    const candidates = [...new Set([...chosen.map((a) => a.id), ...(asApproval ? [asApproval.id] : [])])];
    // A decision by call id is for the round the person read; a later one (asked again once the
    // data changed after someone approved) has another effect: its ap_… id, read first, decides it.
    // Resolved to it, a person who had read round 1 and typed the call id approved round 2 unseen.
    const later = forDecision && candidates.length === 1 && !asApproval ? chosen[0] : undefined;
    if (later?.state === 'pending' && later.supersedes !== undefined) {
      return {
        ok: false,
        code: 'APPROVAL_CONFLICT',
        detail: `Call ${JSON.stringify(id)}'s approval ${later.supersedes} was already decided, and its data changed since: it is asked again as ${later.id} (round ${later.round ?? 2}), with another effect. Read it (\`agentdb approvals show ${later.id}\`) and decide it by that id.`,
      };
    }
    if (candidates.length === 1) return candidates[0]!;
    if (candidates.length > 1) {
      return {
        ok: false,
        code: 'INVALID_ARGUMENTS',
        detail: `${JSON.stringify(id)} names ${candidates.length} approvals (${candidates.join(', ')}): decide with one of those ap_… ids, after checking it with \`agentdb approvals list\`.`,
      };
    }
    return {
      ok: false,
      code: 'NOT_FOUND',
      detail: `There is no approval or parked call ${JSON.stringify(id)}: pass the ap_… id that \`agentdb approvals list\` shows, or the callId of the parked call.`,
    };
  }

  /** Closes the queues it opened (not the Redis connection it was given). */
  async close(): Promise<void> {
    await (await this.queues)?.close();
  }

  /**
   * Wakes the parked job so a worker runs (or finishes) it now. If the worker is still in the
   * middle of parking it, promotion fails here, and the worker, which reads the state again
   * once the job is delayed, promotes it itself: no interleaving loses a decision.
   */
  private async release(approval: Approval): Promise<void> {
    this.queues ??= import('../redis/shard-queues.ts').then(({ ShardQueues }) => new ShardQueues(this.redis, this.keys));
    const [{ Job }, queues] = await Promise.all([import('bullmq'), this.queues]);
    const job = await Job.fromId(queues.of(approval.shard), approval.callKey);
    await job?.promote().catch(() => undefined);
  }
}
