import type { Plan } from '../contracts/settings.ts';
import { checkDiskQuota } from '../policy/disk-quota.ts';
import { workspaceLimits, type WorkspaceLimits } from '../policy/plan-limits.ts';
import { workspaceDiskUse } from './workspace-disk.ts';

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
  /** The four above together: what the byte quota counts. */
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
}

/**
 * A workspace's disk quotas (databases, bytes) by plan: the figures `agentdb usage` shows, and
 * the check before a step that creates a database. The shard op of a fork and the worker of a
 * first write each ask it; the rule itself is `policy/disk-quota.ts`.
 */
export class WorkspaceQuota {
  constructor(private readonly deps: WorkspaceQuotaDeps) {}

  /** What `workspace` holds now, with its plan and limits. */
  async usage(workspace: string): Promise<WorkspaceUsage> {
    const plan = await this.deps.planOf(workspace);
    const disk = workspaceDiskUse(this.deps.dataDir, workspace);
    const offloadedBytes = (await this.deps.offloadedBytes?.(workspace, Date.now())) ?? 0;
    return {
      workspace,
      plan,
      limits: workspaceLimits(plan, this.deps.overrides),
      ...disk,
      offloadedBytes,
      bytes: disk.databaseBytes + disk.historyBytes + disk.ledgerBytes + offloadedBytes,
    };
  }

  /**
   * Refuses a step that adds `adding` to `workspace` past its quota (`what` names the step in
   * the refusal). @throws AgentDbError QUOTA_EXCEEDED.
   */
  async check(workspace: string, adding: { databases: number; bytes: number }, what: string): Promise<void> {
    const u = await this.usage(workspace);
    try {
      checkDiskQuota(workspace, { databases: u.databases.length, bytes: u.bytes }, adding, u.limits, what);
    } catch (err) {
      this.deps.onRefused?.(workspace, 'disk');
      throw err;
    }
  }
}
