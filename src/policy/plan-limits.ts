import type { Plan } from '../contracts/settings.ts';

/** What a database may hold under a plan. */
export interface PlanLimits {
  /** Tables an agent may create (views, indexes and agentdb's own tables do not count). */
  readonly maxTables: number;
  /** Size of the database file; enforced through SQLite's `max_page_count`. */
  readonly maxBytes: number;
}

const MB = 1024 * 1024;

/** The limits of each plan, as the product documents them (DESIGN.md "Limits"). */
export const PLAN_LIMITS = {
  pro: { maxTables: 50, maxBytes: 100 * MB },
  business: { maxTables: 50, maxBytes: 100 * MB },
  enterprise: { maxTables: 200, maxBytes: 1024 * MB },
} as const satisfies Record<Plan, PlanLimits>;

/** The limits for `plan`. */
export function planLimits(plan: Plan): PlanLimits {
  return PLAN_LIMITS[plan];
}
