// The bounds of what a workspace or a call may take: result and call sizes, offloads, disk and
// Redis quotas, call rates, how long results and approvals are kept. A part of the one schema
// (see src/config.ts): each variable's entry, its Config field and their mapping, together.

import { z } from 'zod';
import { int } from './env-checks.ts';

const limitsSchema = z.object({
  /**
   * The most a call's envelope may take as JSON: rows, column names and descriptions past it are
   * cut (and say so), a larger query result goes to the blob store. At least 4 KiB, so that any
   * error envelope fits. 64 KiB, not 1 MiB: every envelope is kept in Redis for RESULT_TTL_HOURS,
   * and 300 calls of 1 MiB took Redis from 3 to 634 MB in 19 s (issue 27).
   */
  MAX_RESULT_BYTES: int(4096, 64 * 1024 * 1024, 64 * 1024),
  MAX_OFFLOAD_BYTES: int(4096, 16 * 1024 * 1024 * 1024, 64 * 1024 * 1024),
  /** What one workspace's offloaded results may hold in the blob store at once (until they expire). */
  MAX_OFFLOADED_BYTES_PER_WORKSPACE: int(0, 1024 * 1024 * 1024 * 1024, 1024 * 1024 * 1024),
  /** Databases a workspace may hold (forks included); 0: its plan's (see policy/plan-limits.ts). */
  WORKSPACE_MAX_DATABASES: int(0, 1_000_000, 0),
  /** Bytes a workspace may hold on disk (files, history, offloaded results); 0: its plan's. */
  WORKSPACE_MAX_BYTES: int(0, Number.MAX_SAFE_INTEGER, 0),
  /**
   * Views one database may hold; 0: its plan's (500 pro and business, 2,000 enterprise). A DDL
   * write that would pass it answers LIMIT_EXCEEDED, as one past the plan's tables does.
   */
  MAX_VIEWS_PER_DATABASE: int(0, 1_000_000, 0),
  /** Indexes one database may hold (CREATE INDEX; a key's own are not counted); 0: its plan's (as views). */
  MAX_INDEXES_PER_DATABASE: int(0, 1_000_000, 0),
  /** The most a call's arguments may take as JSON (params included); larger calls are refused whole. */
  MAX_CALL_BYTES: int(1024, 64 * 1024 * 1024, 1024 * 1024),
  APPROVAL_TTL_MS: int(1000, 30 * 24 * 3600 * 1000, 24 * 3600 * 1000),
  /**
   * Call rates by plan (src/policy/plan-limits.ts), per workspace and per key: `plan` enforces
   * them, `off` lets every call through (a deployment with one trusted tenant).
   */
  RATE_LIMITS: z.enum(['plan', 'off']).default('plan'),
  /** The window rates are counted over, in seconds; the plans' per-minute rates are scaled to it. */
  RATE_LIMIT_WINDOW_S: int(1, 24 * 3600, 60),
  /** Calls one workspace may make per window, whatever its plan (instead of the plan's). */
  RATE_LIMIT_WORKSPACE_CALLS: z.coerce.number().int().min(1).max(100_000_000).optional(),
  /** Calls one key (or a keyless runtime's agent) may make per window, whatever the plan. */
  RATE_LIMIT_KEY_CALLS: z.coerce.number().int().min(1).max(100_000_000).optional(),
  /** MCP `tasks/get`, `tasks/result` and `tasks/cancel` one key may send per window (600 a minute, scaled, when unset). */
  RATE_LIMIT_TASK_POLLS: z.coerce.number().int().min(1).max(100_000_000).optional(),
  /** MCP requests that run no call (initialize, ping, tools/list, notifications) one key may send per window (120 a minute, scaled, when unset). */
  RATE_LIMIT_MCP_REQUESTS: z.coerce.number().int().min(1).max(100_000_000).optional(),
  /**
   * How long a finished call keeps its envelope in Redis (for `agentdb result`, a resent call id,
   * a late waiter) and an offloaded result in the blob store, in hours; then both are trimmed.
   * It replaced RESULT_TTL_S (7 days): a day of a busy workspace's envelopes is what Redis holds.
   */
  RESULT_TTL_HOURS: int(1, 30 * 24, 24),
  /**
   * How often the scheduler removes finished calls past RESULT_TTL_HOURS and their `completed`
   * events from every shard queue, in seconds. A workspace's Redis budget counts a finished
   * call's envelope until RESULT_TTL_HOURS plus this: BullMQ trims its event stream by count
   * only, and a finished job only when another of its queue finishes, so on a quiet shard both
   * outlived the budget's count (issue 27).
   */
  RESULT_TRIM_EVERY_S: int(10, 24 * 3600, 300),
  /**
   * The most a call that waits for a person may carry as JSON (its SQL and params): its job and
   * its approval stay in Redis while it waits (APPROVAL_TTL_MS) and its record for
   * APPROVAL_RETENTION_DAYS after. A larger call is refused with LIMIT_EXCEEDED when it would park.
   */
  MAX_PARKED_CALL_BYTES: int(1024, 64 * 1024 * 1024, 64 * 1024),
  /**
   * Changed rows an approval shows of a parked write's effect (before and after), at most; the
   * counts and the digest cover every row. The rows also fit in MAX_PARKED_CALL_BYTES with the call.
   */
  APPROVAL_EFFECT_ROWS: int(0, 10_000, 50),
  /**
   * What one workspace may hold in Redis (its calls' arguments and envelopes kept for
   * RESULT_TTL_HOURS, its approvals); 0: the workspace's plan sets it (src/policy/plan-limits.ts).
   */
  REDIS_BYTES_PER_WORKSPACE: int(0, Number.MAX_SAFE_INTEGER, 0),
  /**
   * New calls are refused (UNAVAILABLE) once Redis's used_memory is within this percentage of its
   * maxmemory, so that calls under way, approvals and shard leases still find room; 0: off.
   */
  REDIS_MEMORY_HEADROOM_PERCENT: int(0, 90, 20),
  /** Days of metered usage kept. */
  USAGE_RETENTION_DAYS: int(1, 10_000, 400),
  /** Days a finished approval's record is kept in Redis (the database keeps its own audit). */
  APPROVAL_RETENTION_DAYS: int(1, 10_000, 30),
});

/** This part's entries of the environment's schema, which `loadConfig` joins. */
export const limitsEnv = limitsSchema.shape;

/** This part's fields of the frozen `Config`. */
export interface LimitsConfig {
  /** MAX_RESULT_BYTES: the most a call's whole envelope takes as JSON; a larger query result is offloaded to the blob store. */
  readonly maxResultBytes: number;
  /** An offloaded query result is cut at this many bytes of JSON (MAX_OFFLOAD_BYTES). */
  readonly maxOffloadBytes: number;
  /** What one workspace's offloaded results may hold at once (MAX_OFFLOADED_BYTES_PER_WORKSPACE). */
  readonly maxOffloadedBytesPerWorkspace: number;
  /** Databases and bytes a workspace may hold, overriding its plan's where set (WORKSPACE_MAX_*). */
  readonly workspaceQuota: { readonly maxDatabases?: number; readonly maxBytes?: number };
  /** Views and indexes one database may hold, overriding its plan's where set (MAX_VIEWS_PER_DATABASE, MAX_INDEXES_PER_DATABASE). */
  readonly schemaLimits: { readonly maxViews?: number; readonly maxIndexes?: number };
  /** MAX_CALL_BYTES: the most a call's arguments take as UTF-8 JSON (CALL_TOO_LARGE past it). */
  readonly maxCallBytes: number;
  /** APPROVAL_TTL_MS: how long a parked call waits for a decision. */
  readonly approvalTtlMs: number;
  /** RESULT_TTL_HOURS, in seconds. */
  readonly resultTtlS: number;
  /** RESULT_TRIM_EVERY_S. */
  readonly resultTrimEveryS: number;
  /** Call rates and task follow-ups (RATE_LIMITS and RATE_LIMIT_*); false with RATE_LIMITS=off. */
  readonly rateLimits: RateLimitSettings | false;
  /** MAX_PARKED_CALL_BYTES. */
  readonly maxParkedCallBytes: number;
  /** APPROVAL_EFFECT_ROWS. */
  readonly approvalEffectRows: number;
  /** REDIS_BYTES_PER_WORKSPACE: 0 leaves it to the workspace's plan. */
  readonly redisBytesPerWorkspace: number;
  /** REDIS_MEMORY_HEADROOM_PERCENT. */
  readonly redisMemoryHeadroomPercent: number;
  /** USAGE_RETENTION_DAYS: how long the nightly prune keeps usage records in Redis. */
  readonly usageRetentionDays: number;
  /** APPROVAL_RETENTION_DAYS: how long the nightly prune keeps finished approval records in Redis. */
  readonly approvalRetentionDays: number;
}

/**
 * How call rates are limited: over windows of `windowS` seconds, at the plan's rates (scaled from
 * per minute to the window) unless `workspaceCalls` or `keyCalls` (per window) replace them.
 */
export interface RateLimitSettings {
  readonly windowS: number;
  readonly workspaceCalls?: number;
  readonly keyCalls?: number;
  /** MCP `tasks/get`, `tasks/result` and `tasks/cancel` requests a principal may make per window (default `TASK_POLLS_PER_MINUTE`, scaled). */
  readonly taskPolls?: number;
  /** MCP requests that run no call (`initialize`, `ping`, `tools/list`, notifications…) a principal may send per window (default `MCP_REQUESTS_PER_MINUTE`, scaled). */
  readonly mcpRequests?: number;
}

/** This part's fields of `Config`, from its variables as validated. */
export function limitsConfig(e: z.infer<typeof limitsSchema>): LimitsConfig {
  return {
    maxResultBytes: e.MAX_RESULT_BYTES,
    maxOffloadBytes: e.MAX_OFFLOAD_BYTES,
    maxOffloadedBytesPerWorkspace: e.MAX_OFFLOADED_BYTES_PER_WORKSPACE,
    workspaceQuota: Object.freeze({
      ...(e.WORKSPACE_MAX_DATABASES > 0 ? { maxDatabases: e.WORKSPACE_MAX_DATABASES } : {}),
      ...(e.WORKSPACE_MAX_BYTES > 0 ? { maxBytes: e.WORKSPACE_MAX_BYTES } : {}),
    }),
    schemaLimits: Object.freeze({
      ...(e.MAX_VIEWS_PER_DATABASE > 0 ? { maxViews: e.MAX_VIEWS_PER_DATABASE } : {}),
      ...(e.MAX_INDEXES_PER_DATABASE > 0 ? { maxIndexes: e.MAX_INDEXES_PER_DATABASE } : {}),
    }),
    maxCallBytes: e.MAX_CALL_BYTES,
    approvalTtlMs: e.APPROVAL_TTL_MS,
    rateLimits:
      e.RATE_LIMITS === 'off'
        ? false
        : Object.freeze({
            windowS: e.RATE_LIMIT_WINDOW_S,
            ...(e.RATE_LIMIT_WORKSPACE_CALLS ? { workspaceCalls: e.RATE_LIMIT_WORKSPACE_CALLS } : {}),
            ...(e.RATE_LIMIT_KEY_CALLS ? { keyCalls: e.RATE_LIMIT_KEY_CALLS } : {}),
            ...(e.RATE_LIMIT_TASK_POLLS ? { taskPolls: e.RATE_LIMIT_TASK_POLLS } : {}),
            ...(e.RATE_LIMIT_MCP_REQUESTS ? { mcpRequests: e.RATE_LIMIT_MCP_REQUESTS } : {}),
          }),
    resultTtlS: e.RESULT_TTL_HOURS * 3600,
    resultTrimEveryS: e.RESULT_TRIM_EVERY_S,
    maxParkedCallBytes: e.MAX_PARKED_CALL_BYTES,
    approvalEffectRows: e.APPROVAL_EFFECT_ROWS,
    redisBytesPerWorkspace: e.REDIS_BYTES_PER_WORKSPACE,
    redisMemoryHeadroomPercent: e.REDIS_MEMORY_HEADROOM_PERCENT,
    usageRetentionDays: e.USAGE_RETENTION_DAYS,
    approvalRetentionDays: e.APPROVAL_RETENTION_DAYS,
  };
}
