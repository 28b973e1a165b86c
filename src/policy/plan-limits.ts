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

/**
 * What a workspace on each plan may hold in Redis at once (REDIS_BYTES_PER_WORKSPACE overrides
 * it): its calls' arguments and envelopes while kept (RESULT_TTL_HOURS), parked calls and
 * approval records. A small call counts about 2 KB: pro holds some 60,000 calls a day. Apart from
 * {@link PlanLimits}, which bound one database and travel to the executor with it.
 */
export const PLAN_REDIS_BYTES = {
  pro: 128 * MB,
  business: 512 * MB,
  enterprise: 2048 * MB,
} as const satisfies Record<Plan, number>;
