import { AgentDbError } from '../errors.ts';
import type { WorkspaceLimits } from './plan-limits.ts';

/** What a workspace holds on disk, as its quota counts it. */
export interface DiskHeld {
  readonly databases: number;
  readonly bytes: number;
}

/**
 * The disk-quota rule (DESIGN.md "Tenancy"): a step that creates a database (a fork, a restore
 * into a new name, a first write) is refused when the workspace would then hold more databases
 * than its plan allows, or when its bytes are already past its plan's, or would pass it with
 * what the step copies (`adding.bytes`: what it adds on net, below zero for one that frees more
 * than it adds, which no byte quota refuses). Checked before the step: a database already made
 * is never taken away.
 * @throws AgentDbError QUOTA_EXCEEDED naming the quota, the figures and the step.
 */
export function checkDiskQuota(workspace: string, held: DiskHeld, adding: DiskHeld, limits: WorkspaceLimits, what: string): void {
  if (adding.databases > 0 && held.databases + adding.databases > limits.maxDatabases) {
    throw new AgentDbError(
      'QUOTA_EXCEEDED',
      `${what} refused: workspace ${workspace} holds ${held.databases} databases, its quota is ${limits.maxDatabases} (WORKSPACE_MAX_DATABASES or its plan); no command removes a database, so room comes from a larger plan (agentdb workspaces set --plan) or WORKSPACE_MAX_DATABASES`,
    );
  }
  // A step that frees more than it adds (a restore in place to a smaller moment) brings the
  // workspace nearer its quota, past it or not: refusing it would keep the bytes it frees.
  if (adding.bytes >= 0 && held.bytes + adding.bytes > limits.maxBytes) {
    throw new AgentDbError(
      'QUOTA_EXCEEDED',
      `${what} refused: workspace ${workspace} holds ${held.bytes} bytes on disk${adding.bytes > 0 ? ` and this would add about ${adding.bytes}` : ''}, its quota is ${limits.maxBytes} (WORKSPACE_MAX_BYTES or its plan); dropping tables or deleting rows frees none of it (the file keeps its pages, history its commits): room comes back as history older than HISTORY_RETENTION_DAYS is pruned, or with a larger plan (agentdb workspaces set --plan) or WORKSPACE_MAX_BYTES`,
    );
  }
}
