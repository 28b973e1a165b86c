import type { Redis } from 'ioredis';
import { RedisOffloadQuota } from '../blobs/offload-quota.ts';
import type { Config } from '../config.ts';
import type { Plan } from '../contracts/settings.ts';
import type { Keys } from '../redis/keys.ts';
import { WorkspaceRegistry } from '../registry/workspaces.ts';
import { checkDiskQuota } from '../policy/disk-quota.ts';
import { workspaceLimits, type WorkspaceLimits } from '../policy/plan-limits.ts';
import { workspaceDiskUsePaced } from './workspace-disk.ts';
import { dropMoments } from './as-of-cache.ts';
import { codeOf } from '../errors.ts';

/**
 * How long a workspace's verdict for writes ({@link WorkspaceQuota.writesRefusal}) is used before
 * its folder is walked again: the walk costs a stat per file of its databases and history, too
 * much per write, and a workspace past its bytes passes them by at most what it writes meanwhile.
 */
export const WRITES_VERDICT_KEEP_MS = 5_000;

/** Workspaces whose verdict for writes is kept at most; past it all are forgotten at once. */
const WRITES_VERDICTS_MAX = 10_000;

/** What `agentdb usage` shows of a workspace's disk, against its plan. */
export interface WorkspaceUsage {
  readonly workspace: string;
  readonly plan: Plan;
  readonly limits: WorkspaceLimits;
  readonly databases: string[];
  readonly databaseBytes: number;
  readonly historyBytes: number;
  /** Its call-id ledger: the ids of calls sent with their own (see `CallIdLedger`). */
  readonly ledgerBytes: number;
  readonly offloadedBytes: number;
  /** Past moments kept for reads' `as_of`, dropped first when the quota needs room. */
  readonly momentBytes: number;
  /** The five above together: what the byte quota counts. */
  readonly bytes: number;
}

/** What a {@link WorkspaceQuota} reads; passed in, never opened here. */
export interface WorkspaceQuotaDeps {
  dataDir: string;
  /** WORKSPACE_MAX_DATABASES and WORKSPACE_MAX_BYTES where set (Config.workspaceQuota). */
  overrides: Partial<WorkspaceLimits>;
  planOf(workspace: string): Promise<Plan>;
  /** Bytes of the workspace's offloaded results the ledger holds now (`RedisOffloadQuota.held`). */
  offloadedBytes?(workspace: string, now: number): Promise<number>;
  /** Told of each refusal (the `/metrics` counter of quota refusals). */
  onRefused?(workspace: string, quota: 'disk'): void;
  /** How long a verdict for writes is used (default {@link WRITES_VERDICT_KEEP_MS}). */
  writesVerdictKeepMs?: number;
}

/**
 * The disk quota as a running service keeps it: plans from the workspace registry, offloaded
 * results from their ledger in Redis, overrides from the config. The shard workers check with it
 * and `agentdb usage` reads it, so both count the same bytes. `offloaded` is the ledger itself,
 * which the offloaded results also write to.
 */
export function serviceWorkspaceQuota(deps: {
  config: Pick<Config, 'dataDir' | 'workspaceQuota' | 'maxOffloadedBytesPerWorkspace'>;
  redis: Redis;
  keys: Keys;
  onRefused?: WorkspaceQuotaDeps['onRefused'];
  writesVerdictKeepMs?: number;
}): { quota: WorkspaceQuota; offloaded: RedisOffloadQuota } {
  const { config, redis, keys, onRefused, writesVerdictKeepMs } = deps;
  const offloaded = new RedisOffloadQuota(redis, keys, config.maxOffloadedBytesPerWorkspace);
  const workspaces = new WorkspaceRegistry(redis, keys);
  const quota = new WorkspaceQuota({
    dataDir: config.dataDir,
    overrides: config.workspaceQuota,
    planOf: (ws) => workspaces.planOf(ws),
    offloadedBytes: (ws, now) => offloaded.held(ws, now),
    ...(onRefused ? { onRefused } : {}),
    ...(writesVerdictKeepMs !== undefined ? { writesVerdictKeepMs } : {}),
  });
  return { quota, offloaded };
}

/**
 * A workspace's disk quotas (databases, bytes) by plan: the figures `agentdb usage` shows, and
 * the check before a step that creates a database. The shard op of a fork and the worker of a
 * first write each ask it; the rule itself is `policy/disk-quota.ts`.
 */
export class WorkspaceQuota {
  /** Bytes steps of each workspace hold while they build (see {@link hold}), in the order they asked: counted as used, not yet on disk. */
  private readonly held = new Map<string, Map<symbol, number>>();
  /** Each workspace's verdict for writes, as the promise of its walk (one walk for writes at once), and when it began. */
  private readonly writesVerdicts = new Map<string, { at: number; refusal: Promise<string | undefined> }>();

  constructor(private readonly deps: WorkspaceQuotaDeps) {}

  /**
   * Why a write to an existing database of `workspace` is refused (its bytes are past its quota),
   * or undefined: as walked in the last {@link WRITES_VERDICT_KEEP_MS}. Checked only before steps
   * that create a database, the byte quota held nothing back: a workspace made its databases
   * while small, then grew each to its plan's size and ten times that in history (hostile review
   * T3: 5.5× a 30 MB quota in six writes, and on pro up to 1,000 × 1.1 GB against 5 GiB).
   */
  writesRefusal(workspace: string, now = Date.now()): Promise<string | undefined> {
    const kept = this.writesVerdicts.get(workspace);
    if (kept && now - kept.at < (this.deps.writesVerdictKeepMs ?? WRITES_VERDICT_KEEP_MS)) return kept.refusal;
    if (this.writesVerdicts.size >= WRITES_VERDICTS_MAX) this.writesVerdicts.clear();
    const refusal = this.check(workspace, { databases: 0, bytes: 0 }, 'writes').then(
      () => undefined,
      (err: unknown) => {
        if (codeOf(err) !== 'QUOTA_EXCEEDED') throw err;
        return (err as { detail?: string }).detail ?? `writes refused: workspace ${workspace} is past its disk quota`;
      },
    );
    this.writesVerdicts.set(workspace, { at: now, refusal });
    // A walk that failed (a folder gone under it) is not kept: the next write walks again.
    refusal.catch(() => {
      if (this.writesVerdicts.get(workspace)?.refusal === refusal) this.writesVerdicts.delete(workspace);
    });
    return refusal;
  }

  /**
   * {@link check}s a step that adds `adding.bytes`, counting the bytes steps of the workspace
   * that asked before it hold while they build, and holds its own until the returned release
   * is called: N moments built at once for `as_of` reads then each see the earlier ones' room,
   * where each saw the same usage before and all passed, going past the quota together (review
   * 19, H29). Held in this process: steps on other workers' shards are not seen.
   * @throws AgentDbError QUOTA_EXCEEDED.
   */
  /**
   * As {@link hold}, for a step that may be a dry run: a dry run past the quota holds nothing and
   * answers why the step itself would be refused (`refused`, `QUOTA_EXCEEDED: <detail>`), as its
   * preview says; any other refusal, or a real step's, is thrown.
   */
  async holdOrRefusal(
    workspace: string,
    adding: { databases: number; bytes: number },
    what: string,
    dryRun: boolean,
  ): Promise<{ release?: () => void; refused?: string }> {
    try {
      return { release: await this.hold(workspace, adding, what) };
    } catch (err) {
      if (!dryRun || codeOf(err) !== 'QUOTA_EXCEEDED') throw err;
      return { refused: `QUOTA_EXCEEDED: ${(err as { detail?: string }).detail}` };
    }
  }

  async hold(workspace: string, adding: { databases: number; bytes: number }, what: string): Promise<() => void> {
    const token = Symbol(what);
    const holds = this.held.get(workspace) ?? new Map<symbol, number>();
    // The steps held as this one asks count even once they let go during its walk: the walk is
    // paced, and one that wrote its bytes behind the walk and then released was counted by
    // neither (hostile review T5: two restores at once passed the quota by the first's size).
    // One that failed instead still counts for this check: a refusal too many, never a pass.
    const before = new Map(holds);
    // Held before the first await, in order: a step asking after this one counts it.
    const earlier = () => {
      let sum = 0;
      for (const [t, bytes] of holds) {
        if (t === token) break;
        if (!before.has(t)) sum += bytes;
      }
      for (const bytes of before.values()) sum += bytes;
      return sum;
    };
    // A step that frees bytes (a restore to a smaller moment) frees them only once done: it gives
    // no room to the steps after it meanwhile.
    holds.set(token, Math.max(0, adding.bytes));
    this.held.set(workspace, holds);
    const release = () => {
      holds.delete(token);
      if (holds.size === 0 && this.held.get(workspace) === holds) this.held.delete(workspace);
    };
    try {
      await this.check(workspace, adding, what, earlier);
    } catch (err) {
      release();
      throw err;
    }
    return release;
  }

  /** What `workspace` holds now, with its plan and limits. */
  async usage(workspace: string): Promise<WorkspaceUsage> {
    const plan = await this.deps.planOf(workspace);
    // Paced: the worker's event loop turns during the walk of a workspace of many files.
    const disk = await workspaceDiskUsePaced(this.deps.dataDir, workspace);
    const offloadedBytes = (await this.deps.offloadedBytes?.(workspace, Date.now())) ?? 0;
    return {
      workspace,
      plan,
      limits: workspaceLimits(plan, this.deps.overrides),
      ...disk,
      offloadedBytes,
      bytes: disk.databaseBytes + disk.historyBytes + disk.ledgerBytes + disk.momentBytes + offloadedBytes,
    };
  }

  /**
   * Refuses a step that adds `adding` to `workspace` past its quota (`what` names the step in
   * the refusal), once the workspace's kept past moments are dropped when they hold the room.
   * `others`: bytes not on disk yet that count as used (what earlier steps hold, see {@link hold}).
   * @throws AgentDbError QUOTA_EXCEEDED.
   */
  async check(workspace: string, adding: { databases: number; bytes: number }, what: string, others: () => number = () => 0): Promise<void> {
    let u = await this.usage(workspace);
    try {
      try {
        checkDiskQuota(workspace, { databases: u.databases.length, bytes: u.bytes + others() }, adding, u.limits, what);
      } catch (err) {
        // Kept past moments are a cache: their room goes to the step first (see `as-of-cache.ts`).
        if (u.momentBytes === 0) throw err;
        dropMoments(this.deps.dataDir, workspace);
        u = await this.usage(workspace);
        checkDiskQuota(workspace, { databases: u.databases.length, bytes: u.bytes + others() }, adding, u.limits, what);
      }
    } catch (err) {
      this.deps.onRefused?.(workspace, 'disk');
      throw err;
    }
  }
}
