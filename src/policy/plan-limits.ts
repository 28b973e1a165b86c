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

/** How many calls a plan lets be made per rate-limit window (RATE_LIMIT_WINDOW_S, default a minute). */
export interface PlanCallRates {
  /** Calls of one workspace, whoever makes them. */
  readonly workspace: number;
  /**
   * Calls made with one key: an agent key (HTTP, MCP), a member's key (a person's client, the web
   * page), or, for a runtime's call without a key, the agent it calls as.
   */
  readonly key: number;
}

/**
 * Calls per minute by plan (docs/operations.md "Rate limits"). One key gets half its
 * workspace's budget or less, so a single runaway agent cannot take all of it from the others.
 */
export const PLAN_CALL_RATES = {
  pro: { workspace: 1200, key: 600 },
  business: { workspace: 6000, key: 3000 },
  enterprise: { workspace: 30000, key: 12000 },
} as const satisfies Record<Plan, PlanCallRates>;

/** The call rates of `plan`, per minute. */
export function planCallRates(plan: Plan): PlanCallRates {
  return PLAN_CALL_RATES[plan];
}
