import type { PlanLimits } from '../policy/plan-limits.ts';

/**
 * One database as the executor needs it: where the file is, which shard owns it (for
 * eviction when a lease is lost) and the plan's limits.
 */
export interface DbTarget {
  /** `<workspace>` or `<workspace>/<agent>` (see `databaseId`). */
  id: string;
  /** Absolute file path under DATA_DIR (see `databasePath`). */
  path: string;
  shard: number;
  limits: PlanLimits;
}
