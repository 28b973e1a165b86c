import type { Plan } from '../contracts/settings.ts';

/** What a database may hold under a plan. */
export interface PlanLimits {
  /** Tables an agent may create (views, indexes and agentdb's own tables do not count). */
  readonly maxTables: number;
  /**
   * Views an agent may create. Not bounded before session 33: SQLite reads every object's SQL at a
   * handle's first prepare and each DDL's schema check reads them all, so 10,000 views made the
   * database's open 206 ms and each DDL's check 107 ms, and creating them is quadratic in SQLite
   * (1,000 in 1.1 s, 10,000 in 30 s; session 31, T8).
   */
  readonly maxViews: number;
  /** Indexes an agent may create (CREATE INDEX; not those SQLite makes for a key), for the same reason as views. */
  readonly maxIndexes: number;
  /** Size of the database file; enforced through SQLite's `max_page_count`. */
  readonly maxBytes: number;
}

/**
 * What a workspace may hold on disk under a plan, all its databases together: the hostile review
 * forked one 20 MB database ten times (each fork a full copy with its own history) and took the
 * data folder from 60 to 445 MB, with nothing to stop it.
 */
export interface WorkspaceLimits {
  /** Databases: the shared one, each agent's and each fork. */
  readonly maxDatabases: number;
  /** Bytes: database files, their history, offloaded results. */
  readonly maxBytes: number;
}

const MB = 1024 * 1024;

/** The limits of each plan, as the product documents them (DESIGN.md "Limits"). */
export const PLAN_LIMITS = {
  pro: { maxTables: 50, maxViews: 500, maxIndexes: 500, maxBytes: 100 * MB },
  business: { maxTables: 50, maxViews: 500, maxIndexes: 500, maxBytes: 100 * MB },
  enterprise: { maxTables: 200, maxViews: 2000, maxIndexes: 2000, maxBytes: 1024 * MB },
} as const satisfies Record<Plan, PlanLimits>;

const GB = 1024 * MB;

/**
 * The disk each plan's workspace may hold. Every agent has a database of its own, so the count
 * is as many agents as a workspace may run (it bounds files and handles, not bytes); the bytes
 * bound what they hold together, forks and history included: a workspace of many full
 * databases meets the byte quota long before the count.
 */
export const WORKSPACE_LIMITS = {
  pro: { maxDatabases: 1000, maxBytes: 5 * GB },
  business: { maxDatabases: 10_000, maxBytes: 20 * GB },
  enterprise: { maxDatabases: 100_000, maxBytes: 200 * GB },
} as const satisfies Record<Plan, WorkspaceLimits>;

/**
 * The disk quotas of a workspace on `plan`, where an operator's settings (WORKSPACE_MAX_DATABASES,
 * WORKSPACE_MAX_BYTES) override them.
 */
export function workspaceLimits(plan: Plan, overrides: Partial<WorkspaceLimits> = {}): WorkspaceLimits {
  return { ...WORKSPACE_LIMITS[plan], ...overrides };
}

/** The operator's setting that overrides each of a workspace's disk limits (Config.workspaceQuota). */
export const WORKSPACE_LIMIT_SETTINGS = { maxDatabases: 'WORKSPACE_MAX_DATABASES', maxBytes: 'WORKSPACE_MAX_BYTES' } as const;

/** Where one of a workspace's disk limits comes from: the operator's setting, or else the plan's. */
export interface WorkspaceLimitSource {
  readonly setting: (typeof WORKSPACE_LIMIT_SETTINGS)[keyof WorkspaceLimits];
  readonly from: 'setting' | 'plan';
}

/**
 * Where each of the limits {@link workspaceLimits} gives comes from, for the same `overrides`:
 * the limits are the settings of the process that reads them, so a report must say which it
 * shows (a quota set only for the workers showed as the plan's while every write was refused
 * past the workers', session 27, N3).
 */
export function workspaceLimitSources(overrides: Partial<WorkspaceLimits> = {}): Record<keyof WorkspaceLimits, WorkspaceLimitSource> {
  const of = (limit: keyof WorkspaceLimits): WorkspaceLimitSource => ({
    setting: WORKSPACE_LIMIT_SETTINGS[limit],
    from: overrides[limit] !== undefined ? 'setting' : 'plan',
  });
  return { maxDatabases: of('maxDatabases'), maxBytes: of('maxBytes') };
}

/** The operator's overrides of a database's schema bounds (MAX_VIEWS_PER_DATABASE, MAX_INDEXES_PER_DATABASE; Config.schemaLimits). */
export type SchemaLimitOverrides = Partial<Pick<PlanLimits, 'maxViews' | 'maxIndexes'>>;

/** Limits made for each plan and set of overrides, so that every call of a plan shares one object. */
const withOverrides = new WeakMap<SchemaLimitOverrides, Map<Plan, PlanLimits>>();

/** The limits for `plan`, where the operator's `overrides` (views, indexes per database) replace the plan's. */
export function planLimits(plan: Plan, overrides?: SchemaLimitOverrides): PlanLimits {
  if (!overrides || (overrides.maxViews === undefined && overrides.maxIndexes === undefined)) return PLAN_LIMITS[plan];
  let byPlan = withOverrides.get(overrides);
  if (!byPlan) withOverrides.set(overrides, (byPlan = new Map()));
  let limits = byPlan.get(plan);
  if (!limits) byPlan.set(plan, (limits = Object.freeze({ ...PLAN_LIMITS[plan], ...overrides })));
  return limits;
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
