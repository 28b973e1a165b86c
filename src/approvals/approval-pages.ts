import type { Keys } from '../redis/keys.ts';
import type { ScriptedRedis } from '../redis/lua-scripts.ts';
import type { Approval, ApprovalState } from './approval.ts';
import { readFacets } from './approval-facets-read.ts';
import { parseApproval } from './approval-hash.ts';
import { backfillWorkspaceIndexes } from './approval-index-backfill.ts';
import { walkIndex } from './approval-index-walk.ts';
import { passes, type ApprovalFacets, type ApprovalFilter, type ListCursor } from './approval-listing.ts';

/** Service-wide index entries the one-time backfill reads per step. */
const BACKFILL_BATCH = 1000;

/** Which page of one workspace's approvals a scan asks for (see {@link ApprovalPages.scan}). */
export interface ApprovalScan {
  workspace: string;
  state: ApprovalState | 'all';
  limit: number;
  cursor?: ListCursor;
  filter?: ApprovalFilter;
  /** Hears how many entries of the index the page looked at, to charge it by (`GET /v1/approvals`). */
  onRead?: (entries: number) => void;
}

/**
 * The reads of many approvals at once, for {@link ApprovalStore}: lists, cursor pages and the
 * inbox's pages, each from a workspace's own index where it has one, reading whole only the
 * records it returns. The per-workspace indexes are backfilled once for the whole service
 * before the first such read.
 */
export class ApprovalPages {
  /** Whether `approvalsIndexed` was seen: once set it stays, so each process asks once. */
  private indexedSeen = false;
  /** The backfill under way in this process, which its other pages wait for. */
  private indexing?: Promise<void>;

  constructor(
    private readonly redis: ScriptedRedis,
    private readonly keys: Keys,
  ) {}

  /**
   * Approvals, newest first, filtered by workspace and state (`all` for every state). With a
   * workspace, only its own index is read (the service-wide one's mirror), so another
   * workspace's approvals are never read whole for it (`agentdb approvals list --workspace`, a
   * decision by call id).
   */
  async list(filter: { workspace?: string; state?: ApprovalState | 'all'; limit?: number } = {}): Promise<Approval[]> {
    const state = filter.state ?? 'pending';
    const { workspace } = filter;
    if (workspace) await this.ensureIndexed();
    const index = workspace
      ? state === 'pending'
        ? this.keys.approvalsExpiringOf(workspace)
        : this.keys.approvalsAllOf(workspace)
      : state === 'pending'
        ? this.keys.approvalsPending
        : this.keys.approvalsAll;
    const ids = await this.redis.zrevrange(index, 0, -1);
    const out: Approval[] = [];
    const limit = filter.limit ?? Infinity;
    for (let i = 0; i < ids.length && out.length < limit; i += 500) {
      const pipeline = this.redis.pipeline();
      for (const id of ids.slice(i, i + 500)) pipeline.hgetall(this.keys.approval(id));
      for (const [, raw] of (await pipeline.exec()) ?? []) {
        const approval = parseApproval(raw as Record<string, string>);
        if (!approval) continue;
        if (filter.workspace && approval.workspace !== filter.workspace) continue;
        if (state !== 'all' && approval.state !== state) continue;
        if (out.length < limit) out.push(approval);
      }
    }
    if (state === 'pending') out.sort((a, b) => b.createdAt - a.createdAt);
    return out;
  }

  /**
   * Up to `limit` of a workspace's approvals in `state` after `cursor`, newest first (pending
   * ones by expiry, the rest by creation), and where the next page starts. Only the workspace's
   * own index is read (approval-create.lua and approval-transition.lua keep it beside the
   * service-wide one, with the same scores, so a cursor means the same in both): other
   * workspaces' approvals cost a page nothing and never make it short. A page looks at no more
   * than SCAN_PER_PAGE of the workspace's own entries, reading only their small fields, and reads
   * whole only the records it returns: narrowed to a decided state or by a filter, past that many
   * of its own approvals that do not match, it comes back short (even empty) with `next`.
   */
  async scan(filter: ApprovalScan): Promise<{ approvals: Approval[]; next?: ListCursor }> {
    await this.ensureIndexed();
    const pending = filter.state === 'pending';
    const index = pending ? this.keys.approvalsExpiringOf(filter.workspace) : this.keys.approvalsAllOf(filter.workspace);
    const { chosen, next } = await walkIndex(this.redis, this.keys, index, { ...filter, pending });
    const pipeline = this.redis.pipeline();
    for (const { id } of chosen) pipeline.hgetall(this.keys.approval(id));
    const approvals = chosen.length
      ? ((await pipeline.exec()) ?? []).map(([, raw]) => parseApproval(raw as Record<string, string>)).filter((a): a is Approval => a !== undefined)
      : [];
    return { approvals, ...(next ? { next } : {}) };
  }

  /**
   * One page of a workspace's pending or decided approvals, newest first (decided ones by when
   * they were decided), narrowed by `filter`, how many there are, and which agents, databases
   * and tools the workspace's approvals in that state name (the inbox's filter choices). The page
   * is chosen from each record's small fields (see {@link facets}); only the page's own records
   * are read whole. A record holds up to ~1 MB of SQL and params, so reading every one to show
   * 25 would let one agent's parked calls load the server. Only the workspace's own index is read
   * (approval-create.lua and approval-transition.lua keep it): its cost is the workspace's own
   * approvals in that state, whatever other workspaces hold (hostile review H27-3).
   */
  async page(filter: {
    workspace: string;
    state: 'pending' | 'decided';
    offset: number;
    limit: number;
    filter?: ApprovalFilter;
    /** Hears how many entries of the index were read (each a record's small fields), to charge the page by. */
    onRead?: (entries: number) => void;
  }): Promise<{ approvals: Approval[]; total: number; choices: Required<{ [K in keyof ApprovalFilter]: string[] }> }> {
    await this.ensureIndexed();
    const pending = filter.state === 'pending';
    const index = pending ? this.keys.approvalsPendingOf(filter.workspace) : this.keys.approvalsDecidedOf(filter.workspace);
    const ids = await this.redis.zrevrange(index, 0, -1);
    filter.onRead?.(ids.length);
    const matches: { id: string; at: number }[] = [];
    const choices = { agent: new Set<string>(), database: new Set<string>(), tool: new Set<string>() };
    for (let i = 0; i < ids.length; i += 1000) {
      const batch = ids.slice(i, i + 1000);
      const rows = await this.indexed(index, batch, pending);
      rows.forEach((row, j) => {
        if (!row) return;
        choices.agent.add(row.agent);
        choices.database.add(row.database);
        choices.tool.add(row.tool);
        if (filter.filter && !passes(row, filter.filter)) return;
        // Decided: in the order of decisions (an approval approved last week and decided now is
        // the newest decision), by Redis's clock as the transition recorded it.
        matches.push({ id: batch[j]!, at: filter.state === 'decided' ? (row.decidedAt ?? row.createdAt) : row.createdAt });
      });
    }
    // Newest first; the id breaks ties so that pages neither repeat nor skip a record.
    matches.sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
    const chosen = matches.slice(filter.offset, filter.offset + filter.limit);
    const pipeline = this.redis.pipeline();
    for (const { id } of chosen) pipeline.hgetall(this.keys.approval(id));
    const approvals = chosen.length
      ? ((await pipeline.exec()) ?? []).map(([, raw]) => parseApproval(raw as Record<string, string>)).filter((a): a is Approval => a !== undefined)
      : [];
    const sorted = (set: Set<string>) => [...set].filter(Boolean).sort();
    return { approvals, total: matches.length, choices: { agent: sorted(choices.agent), database: sorted(choices.database), tool: sorted(choices.tool) } };
  }

  /** How many approvals of a workspace wait for a decision, by database; `onRead` hears how many entries it read. */
  async pendingByDatabase(workspace: string, onRead?: (entries: number) => void): Promise<Map<string, number>> {
    await this.ensureIndexed();
    const index = this.keys.approvalsPendingOf(workspace);
    const ids = await this.redis.zrange(index, 0, -1);
    onRead?.(ids.length);
    const out = new Map<string, number>();
    for (let i = 0; i < ids.length; i += 1000) {
      for (const row of await this.indexed(index, ids.slice(i, i + 1000), true)) {
        if (row) out.set(row.database, (out.get(row.database) ?? 0) + 1);
      }
    }
    return out;
  }

  /**
   * The facets of a workspace index's entries, undefined for one that no longer belongs there,
   * which is dropped from the index: a record pruned, or one the backfill listed as pending while
   * it was being decided.
   */
  private async indexed(index: string, ids: string[], pending: boolean): Promise<(ApprovalFacets | undefined)[]> {
    const rows = (await readFacets(this.redis, this.keys, ids)).map((row) => (row && (row.state === 'pending') === pending ? row : undefined));
    const stale = ids.filter((_, i) => !rows[i]);
    if (stale.length) await this.redis.zrem(index, ...stale);
    return rows;
  }

  /**
   * Puts every approval made before the per-workspace indexes existed into them, once for the
   * whole service: the first inbox or Data page after the upgrade walks the service-wide indexes
   * in steps of BACKFILL_BATCH (ZSCAN, so entries pruned meanwhile skip none), then sets
   * `approvalsIndexed`. A marker per workspace would make each workspace's first page walk the
   * whole service again. The pages of one process wait for one walk; two processes racing both
   * walk (the ZADDs are idempotent).
   */
  private async ensureIndexed(): Promise<void> {
    if (this.indexedSeen) return;
    this.indexing ??= this.backfill().finally(() => {
      this.indexing = undefined;
    });
    await this.indexing;
  }

  private async backfill(): Promise<void> {
    if (!(await this.redis.exists(this.keys.approvalsIndexed))) await backfillWorkspaceIndexes(this.redis, this.keys, BACKFILL_BATCH);
    this.indexedSeen = true;
  }
}
