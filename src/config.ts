// One file on purpose, past 300 lines: the environment's schema (one entry per variable), the
// frozen Config it becomes and loadConfig mapping one to the other change together, since every
// new variable touches all three; config is read through this file alone (issue 26).

import os from 'node:os';
import path from 'node:path';
import cronParser from 'cron-parser';
import { z } from 'zod';

const int = (min: number, max: number, fallback: number) => z.coerce.number().int().min(min).max(max).default(fallback);

/** What REDIS_URL (and a client's `redisUrl`) must look like. */
export const REDIS_URL_PATTERN = /^rediss?:\/\//;
/** What AGENTDB_PREFIX (and a client's `prefix`) must look like: it goes into every Redis key. */
export const PREFIX_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The environment agentdb reads, and nothing else. Entry points call {@link loadConfig} once
 * and pass the result down; no module reads `process.env` on its own.
 */
const envSchema = z.object({
  REDIS_URL: z.string().regex(REDIS_URL_PATTERN, 'must be a redis:// or rediss:// URL').default('redis://127.0.0.1:6379'),
  AGENTDB_DATA_DIR: z.string().min(1).default('./data'),
  /** Prefix of every Redis key and queue, so several deployments (and tests) share one Redis. */
  AGENTDB_PREFIX: z.string().regex(PREFIX_PATTERN, 'letters, digits, _ and - only (1 to 64)').default('agentdb'),
  SHARD_COUNT: int(1, 4096, 16),
  PORT: int(0, 65535, 7070),
  HOST: z.string().min(1).default('127.0.0.1'),
  STATEMENT_TIMEOUT_MS: int(10, 600_000, 10_000),
  /** Jobs a shard's BullMQ worker holds at once. */
  WORKER_CONCURRENCY: int(1, 1000, 32),
  /**
   * Calls of one agent a shard's worker runs at once; its next call goes back to the queue
   * (delayed, not refused) until one ends. Default: a quarter of WORKER_CONCURRENCY, at least 1.
   */
  AGENT_SHARD_CONCURRENCY: z.coerce.number().int().min(1).max(1000).optional(),
  /** Executor children per worker process. Default: the CPUs this process may use, at least 2. */
  EXECUTOR_POOL_SIZE: z.coerce.number().int().min(1).max(1024).optional(),
  /** Children one workspace may hold at once. Default: half the pool, rounded up. */
  EXECUTOR_WORKSPACE_SHARE: z.coerce.number().int().min(1).max(1024).optional(),
  /**
   * Executor children beyond the pool for the overflow lane: taken only while every pooled child
   * runs a statement past EXECUTOR_LONG_MS, by a statement its workspace saw finish quickly (a
   * quiet workspace's usual read under a burst of runaways). 0: no lane.
   */
  EXECUTOR_OVERFLOW: int(0, 64, 1),
  /** What counts as a long statement for the overflow lane, in ms. */
  EXECUTOR_LONG_MS: int(10, 600_000, 250),
  /** How long a shard lease lives without renewal before another worker may take the shard. */
  LEASE_TTL_MS: int(500, 600_000, 10_000),
  /** BullMQ job lock; a dead worker's job is retried after it lapses. */
  LOCK_DURATION_MS: int(500, 600_000, 30_000),
  STALLED_INTERVAL_MS: int(500, 600_000, 30_000),
  /**
   * How long a stopping process (SIGTERM, SIGINT) lets the jobs in hand finish and its leases go
   * back before it exits anyway: a stop during a Redis outage otherwise waited for Redis.
   */
  DRAIN_GRACE_MS: int(100, 600_000, 10_000),
  /**
   * How often a scheduler looks for its job schedulers and puts back any that are missing (a
   * Redis that came back empty lost them); it also looks each time its connection comes back.
   */
  SCHEDULER_CHECK_MS: int(500, 3_600_000, 60_000),
  /** SQLite's memory per executor child, so a huge allocation fails instead of the host. */
  EXECUTOR_HEAP_LIMIT_MB: int(16, 65_536, 512),
  /** Open SQLite handles kept per executor child; ten thousand databases must not mean ten thousand files. */
  HANDLE_CACHE_SIZE: int(1, 100_000, 128),
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
  /** The bearer token `GET /metrics` asks for; unset, /metrics is off (it names workspaces). */
  METRICS_TOKEN: z.string().min(16).optional(),
  /**
   * The port `agentdb worker` serves `GET /metrics` on (its own calls, executor children, capture
   * lag, refusals), on HOST, behind METRICS_TOKEN; 0: none. `agentdb start` serves it on PORT.
   */
  WORKER_METRICS_PORT: int(0, 65_535, 0),
  /** How many workspaces `/metrics` shows the Redis bytes of, the most first: bounds its labels. */
  METRICS_TOP_WORKSPACES: int(0, 1000, 20),
  /** The most a call's arguments may take as JSON (params included); larger calls are refused whole. */
  MAX_CALL_BYTES: int(1024, 64 * 1024 * 1024, 1024 * 1024),
  /**
   * Memory the prepared statements an executor child keeps may take, as estimated, across all
   * its databases; statements past a sixteenth of it are not kept at all.
   */
  STATEMENT_CACHE_BYTES: int(0, 4 * 1024 * 1024 * 1024, 32 * 1024 * 1024),
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
  /** When the maintenance job runs (cron, in SCHEDULE_TZ). */
  MAINTENANCE_CRON: z
    .string()
    .default('17 3 * * *')
    .refine((cron) => cronError(cron, 'UTC') === undefined, { error: (i) => `not a cron pattern: ${cronError(String(i.input), 'UTC')}` }),
  SCHEDULE_TZ: z
    .string()
    .default('UTC')
    .refine((tz) => cronError('0 0 * * *', tz) === undefined, 'not a time zone (an IANA name such as UTC or Europe/Paris)'),
  /** Days of metered usage kept. */
  USAGE_RETENTION_DAYS: int(1, 10_000, 400),
  /** Days a finished approval's record is kept in Redis (the database keeps its own audit). */
  APPROVAL_RETENTION_DAYS: int(1, 10_000, 30),
  /** Where backups and offloaded results go: `folder` (BLOB_DIR) or `s3` (the S3_* keys). */
  BLOB_STORE: z.enum(['folder', 's3']).default('folder'),
  /** The folder store's root. Default: `<AGENTDB_DATA_DIR>/blobs`. */
  BLOB_DIR: z.string().min(1).optional(),
  /** An S3-compatible endpoint (MinIO, R2, …); AWS itself when unset. */
  S3_ENDPOINT: z.url().optional(),
  S3_BUCKET: z
    .string()
    .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'not an S3 bucket name')
    .optional(),
  S3_REGION: z.string().min(1).default('us-east-1'),
  S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  S3_FORCE_PATH_STYLE: z.stringbool().default(false),
  /** When the nightly backup runs (cron, in BACKUP_TZ). */
  BACKUP_CRON: z
    .string()
    .default('0 2 * * *')
    .refine((cron) => cronError(cron, 'UTC') === undefined, { error: (i) => `not a cron pattern: ${cronError(String(i.input), 'UTC')}` }),
  BACKUP_TZ: z
    .string()
    .default('UTC')
    .refine((tz) => cronError('0 0 * * *', tz) === undefined, 'not a time zone (an IANA name such as UTC or Europe/Paris)'),
  /** Point-in-time history of every database (`off` only to measure what it costs). */
  HISTORY_CAPTURE: z.enum(['on', 'off']).default('on'),
  /** Days of history kept: restores reach this far back, and the prune deletes what is older. */
  HISTORY_RETENTION_DAYS: int(1, 10_000, 30),
  /** A database's WAL is checkpointed once it passes this size (after its frames were copied). */
  HISTORY_CHECKPOINT_BYTES: int(4096, 1024 * 1024 * 1024, 4 * 1024 * 1024),
  /** A database's history quota in bytes; 0: ten times its plan's database size. */
  HISTORY_MAX_BYTES_PER_DB: int(0, Number.MAX_SAFE_INTEGER, 0),
  /**
   * How far a database's WAL may run ahead of a history whose copies fail before its writes
   * answer STORAGE_FULL (its commits stay in the WAL, never checkpointed before they are copied).
   */
  HISTORY_MAX_BEHIND_BYTES: int(64 * 1024, 16 * 1024 * 1024 * 1024, 64 * 1024 * 1024),
  /** How long a moment a read's `as_of` restored is kept unused before it is dropped (minutes). */
  AS_OF_KEEP_MINUTES: int(1, 7 * 24 * 60, 15),
  /** When each database with commits since its last snapshot gets a new one (cron, in SCHEDULE_TZ). */
  HISTORY_SNAPSHOT_CRON: z
    .string()
    .default('30 1 * * *')
    .refine((cron) => cronError(cron, 'UTC') === undefined, { error: (i) => `not a cron pattern: ${cronError(String(i.input), 'UTC')}` }),
  /** When history past HISTORY_RETENTION_DAYS is deleted (cron, in SCHEDULE_TZ). */
  HISTORY_PRUNE_CRON: z
    .string()
    .default('47 3 * * *')
    .refine((cron) => cronError(cron, 'UTC') === undefined, { error: (i) => `not a cron pattern: ${cronError(String(i.input), 'UTC')}` }),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * OpenTelemetry spans of each call (client, queue, worker, executor, approval wait) on the
   * tracer provider the process registered (e.g. with `node --import` of an SDK's setup); off: none.
   */
  TRACING: z.enum(['on', 'off']).default('off'),
  /** The member key the CLI decides approvals with, when neither `--key-file` nor `--key` is given. */
  AGENTDB_MEMBER_KEY: z.string().optional(),
  /** The key (an agent's or a member's) `agentdb mcp --stdio` serves with, when neither `--key-file` nor `--key` is given. */
  AGENTDB_KEY: z.string().optional(),
  /** How long one HTTP request (`POST /v1/calls`, `GET …?wait=true`) waits before answering where the call stands. */
  HTTP_WAIT_MS: int(100, 600_000, 30_000),
  /**
   * How long a request may take to arrive whole, headers and body, before 408 and a closed
   * connection (see src/http/connection-limits.ts); a long poll or SSE stream once received is not cut.
   */
  HTTP_REQUEST_TIMEOUT_MS: int(1_000, 600_000, 30_000),
  /**
   * Connections one address may hold open at once (unset behind TRUST_PROXY, where every
   * connection is the proxy's). A large office behind one NAT, reached without a proxy, may need more.
   */
  HTTP_CONNECTIONS_PER_ADDRESS: int(1, 1_000_000, 256),
  /** Connections the HTTP server holds at once, whoever opens them: well under the process's file descriptors. */
  HTTP_MAX_CONNECTIONS: int(1, 1_000_000, 8_192),
  /**
   * Web-page CSV exports under way at once per member, per workspace, and in the process: each
   * holds up to three chunks of up to 2 MiB in the HTTP process while it downloads (see
   * src/shards/export-slots.ts). Past one, the export is refused with RATE_LIMITED (429).
   */
  EXPORTS_PER_MEMBER: int(1, 10_000, 4),
  EXPORTS_PER_WORKSPACE: int(1, 10_000, 8),
  EXPORTS_MAX: int(1, 100_000, 64),
  /**
   * How long an MCP tool call (one that asked for no task) waits for a person's decision before
   * answering that it is pending. Below 60 s, the MCP SDK clients' default request timeout: at
   * 60 s the SDK client, LangChain and OpenAI Agents gave up with -32001 first and never learned
   * the approval id (issue 28). 25 s leaves room for a slow network and a client set shorter.
   */
  MCP_APPROVAL_WAIT_MS: int(100, 59_999, 25_000),
  /**
   * Browser origins `/mcp` serves besides its own and loopback ones (comma-separated, e.g.
   * `https://app.example.com`); any other Origin header, `null` included, is refused with 403.
   * Requests without an Origin (every non-browser client) are not affected.
   */
  MCP_ALLOWED_ORIGINS: z
    .string()
    .default('')
    .transform((v, ctx): string[] => {
      const list = commaList(v);
      for (const o of list) {
        const parsed = URL.canParse(o) ? new URL(o) : undefined;
        if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.origin !== o.replace(/\/$/, '')) {
          ctx.addIssue({ code: 'custom', message: `not an origin (scheme://host[:port], nothing after): ${JSON.stringify(o)}` });
          return z.NEVER;
        }
      }
      return list.map((o) => new URL(o).origin);
    }),
  /**
   * Host names `/mcp` answers to besides loopback and HOST (comma-separated, no ports: the name
   * your clients use, e.g. `agentdb.example.com`), against DNS rebinding; `*`: any host (only
   * when a proxy in front checks the Host itself).
   */
  MCP_ALLOWED_HOSTS: z
    .string()
    .default('')
    .transform((v, ctx): string[] | '*' => {
      if (v.trim() === '*') return '*';
      const list = commaList(v).map((h) => h.toLowerCase());
      for (const h of list) {
        if (!URL.canParse(`http://${h}`) || new URL(`http://${h}`).host !== h || h.includes(':') !== h.startsWith('[')) {
          ctx.addIssue({ code: 'custom', message: `not a host name without a port: ${JSON.stringify(h)}` });
          return z.NEVER;
        }
      }
      return list;
    }),
  /** How long a web page session lives without a request (sliding); the cookie itself ends with the browser. */
  WEB_SESSION_TTL_S: int(60, 30 * 24 * 3600, 8 * 3600),
  /** OAuth sign-in for people's MCP clients (docs/mcp-http.md "Sign in with OAuth"); `off` leaves keys only. */
  OAUTH: z.enum(['on', 'off']).default('on'),
  /** How long an OAuth access token works; a client refreshes it with its refresh token. */
  OAUTH_ACCESS_TOKEN_TTL_S: int(60, 24 * 3600, 3600),
  /** How long an OAuth grant lasts unused: each refresh rotates the refresh token and starts this again. */
  OAUTH_REFRESH_TOKEN_TTL_S: int(3600, 365 * 24 * 3600, 30 * 24 * 3600),
  /**
   * The most registered OAuth clients nobody has signed in through yet that the whole service
   * keeps (each lapses a day after registering); past it, registration answers 429 until one lapses.
   */
  OAUTH_UNCONSENTED_CLIENTS_MAX: int(1, 10_000_000, 10_000),
  /**
   * Requests to /oauth/token and /oauth/revoke one address (an IPv6 /64) may make a minute;
   * past it they answer 429 too_many_requests with Retry-After.
   */
  OAUTH_TOKEN_REQUESTS_PER_MINUTE: int(1, 1_000_000, 60),
  /**
   * The URL people and MCP clients reach agentdb at (https://agentdb.example.com), which names the
   * OAuth issuer and resources. Unset: each request's own origin (under TRUST_PROXY, the proxy's).
   */
  PUBLIC_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL such as https://agentdb.example.com' }).optional(),
  /**
   * How long the HTTP server keeps who a key is without asking Redis again. Registry changes are
   * announced, so a revoked key stops at once; this bounds it if an announcement is missed. 0: off.
   */
  KEY_CACHE_TTL_MS: int(0, 600_000, 5000),
  /**
   * Behind a TLS proxy: which proxies' X-Forwarded-Proto/-Host/-For to believe. `false` (none,
   * the default), `true` (any), a hop count, or comma-separated addresses or CIDRs. Without it
   * the session cookie is not marked Secure and the sign-in form's Origin check sees the
   * proxy's Host, not the page's.
   */
  TRUST_PROXY: z
    .string()
    .default('false')
    .transform((v, ctx): boolean | number | string[] => {
      const t = v.trim();
      if (t === 'false' || t === '') return false;
      if (t === 'true') return true;
      if (/^\d+$/.test(t)) return Number(t);
      const list = t
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean);
      if (list.every((x) => /^[0-9a-fA-F:.]+(\/\d{1,3})?$/.test(x))) return list;
      ctx.addIssue({ code: 'custom', message: 'TRUST_PROXY is false, true, a hop count, or comma-separated IP addresses or CIDRs' });
      return z.NEVER;
    }),
});

/** The items of a comma-separated setting, trimmed, empty ones dropped. */
function commaList(v: string): string[] {
  return v
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
}

/** Every variable agentdb reads (docs/operations.md's table lists each; a test keeps them in step). */
export const ENV_NAMES: readonly string[] = Object.freeze(Object.keys(envSchema.shape));

/**
 * What is wrong with a schedule, or undefined when BullMQ can run it: the check is the parse
 * its job scheduler makes (cron-parser, the version BullMQ pins), run here so that a bad pattern
 * or time zone stops start-up with the variable's name instead of a stack trace from BullMQ.
 */
function cronError(pattern: string, tz: string): string | undefined {
  try {
    // A bad time zone only shows when a date is computed.
    cronParser.parseExpression(pattern, { tz }).next();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** The validated, frozen configuration. */
export interface Config {
  readonly redisUrl: string;
  readonly dataDir: string;
  readonly prefix: string;
  readonly shardCount: number;
  readonly port: number;
  readonly host: string;
  readonly statementTimeoutMs: number;
  readonly workerConcurrency: number;
  readonly agentShardConcurrency: number;
  readonly executorPoolSize: number;
  readonly executorWorkspaceShare: number;
  /** Overflow-lane children beyond the pool (EXECUTOR_OVERFLOW). */
  readonly executorOverflow: number;
  /** A statement past this (ms) counts as long for the overflow lane (EXECUTOR_LONG_MS). */
  readonly executorLongMs: number;
  readonly leaseTtlMs: number;
  readonly lockDurationMs: number;
  readonly stalledIntervalMs: number;
  /** DRAIN_GRACE_MS. */
  readonly drainGraceMs: number;
  /** SCHEDULER_CHECK_MS. */
  readonly schedulerCheckMs: number;
  readonly executorHeapLimitMb: number;
  readonly handleCacheSize: number;
  readonly maxResultBytes: number;
  /** An offloaded query result is cut at this many bytes of JSON (MAX_OFFLOAD_BYTES). */
  readonly maxOffloadBytes: number;
  /** What one workspace's offloaded results may hold at once (MAX_OFFLOADED_BYTES_PER_WORKSPACE). */
  readonly maxOffloadedBytesPerWorkspace: number;
  /** Databases and bytes a workspace may hold, overriding its plan's where set (WORKSPACE_MAX_*). */
  readonly workspaceQuota: { readonly maxDatabases?: number; readonly maxBytes?: number };
  /** The bearer token `GET /metrics` asks for (METRICS_TOKEN); absent, the route answers NOT_FOUND. */
  readonly metricsToken?: string;
  /** WORKER_METRICS_PORT: 0 for none. */
  readonly workerMetricsPort: number;
  /** METRICS_TOP_WORKSPACES. */
  readonly metricsTopWorkspaces: number;
  readonly maxCallBytes: number;
  readonly statementCacheBytes: number;
  readonly approvalTtlMs: number;
  /** RESULT_TTL_HOURS, in seconds. */
  readonly resultTtlS: number;
  /** RESULT_TRIM_EVERY_S. */
  readonly resultTrimEveryS: number;
  /** Call rates (RATE_LIMITS and RATE_LIMIT_*); false with RATE_LIMITS=off. */
  readonly rateLimits: RateLimitSettings | false;
  /** MAX_PARKED_CALL_BYTES. */
  readonly maxParkedCallBytes: number;
  /** APPROVAL_EFFECT_ROWS. */
  readonly approvalEffectRows: number;
  /** REDIS_BYTES_PER_WORKSPACE: 0 leaves it to the workspace's plan. */
  readonly redisBytesPerWorkspace: number;
  /** REDIS_MEMORY_HEADROOM_PERCENT. */
  readonly redisMemoryHeadroomPercent: number;
  readonly maintenanceCron: string;
  readonly scheduleTz: string;
  readonly usageRetentionDays: number;
  readonly approvalRetentionDays: number;
  /** Where backups and offloaded results go (BLOB_STORE and its keys). Holds a secret: never logged. */
  readonly blob: BlobConfig;
  readonly backupCron: string;
  readonly backupTz: string;
  /** Capture on: what executor children are started with; undefined with HISTORY_CAPTURE=off. */
  readonly history?: {
    readonly checkpointBytes: number;
    readonly retentionDays: number;
    readonly maxBytesPerDb: number;
    readonly maxBehindBytes: number;
    /** AS_OF_KEEP_MINUTES in ms. */
    readonly asOfKeepMs: number;
  };
  readonly historyRetentionDays: number;
  readonly historySnapshotCron: string;
  readonly historyPruneCron: string;
  readonly logLevel: z.infer<typeof envSchema>['LOG_LEVEL'];
  /** A secret: never logged. */
  readonly memberKey?: string;
  /** AGENTDB_KEY, for `agentdb mcp --stdio`. A secret: never logged. */
  readonly mcpKey?: string;
  readonly httpWaitMs: number;
  /** HTTP_REQUEST_TIMEOUT_MS, HTTP_CONNECTIONS_PER_ADDRESS, HTTP_MAX_CONNECTIONS (src/http/connection-limits.ts). */
  readonly httpConnections: { readonly requestTimeoutMs: number; readonly perAddress: number; readonly total: number };
  /** EXPORTS_PER_MEMBER, EXPORTS_PER_WORKSPACE, EXPORTS_MAX (src/shards/export-slots.ts). */
  readonly exportBounds: { readonly perMember: number; readonly perWorkspace: number; readonly total: number };
  readonly mcpApprovalWaitMs: number;
  /** MCP_ALLOWED_ORIGINS, each an origin (`https://app.example.com`). */
  readonly mcpAllowedOrigins: readonly string[];
  /** MCP_ALLOWED_HOSTS: host names without ports, or `*` for any. */
  readonly mcpAllowedHosts: readonly string[] | '*';
  readonly webSessionTtlS: number;
  /** OAuth sign-in (OAUTH, OAUTH_*_TTL_S); undefined with OAUTH=off. */
  readonly oauth?: {
    readonly accessTtlS: number;
    readonly refreshTtlS: number;
    readonly unconsentedClientsMax: number;
    readonly tokenRequestsPerMinute: number;
  };
  /** PUBLIC_URL, without a trailing slash. */
  readonly publicUrl?: string;
  readonly keyCacheTtlMs: number;
  /** TRACING=on: spans on the registered OpenTelemetry tracer provider (src/tracing.ts). */
  readonly tracing: boolean;
  /** Fastify's `trustProxy` (TRUST_PROXY). */
  readonly trustProxy: boolean | number | string[];
}

/**
 * How call rates are limited: over windows of `windowS` seconds, at the plan's rates (scaled from
 * per minute to the window) unless `workspaceCalls` or `keyCalls` (per window) replace them.
 */
export interface RateLimitSettings {
  readonly windowS: number;
  readonly workspaceCalls?: number;
  readonly keyCalls?: number;
}

/** The blob store's configuration: a folder (BLOB_DIR, default `<data>/blobs`) or an S3 bucket. */
export type BlobConfig =
  | { kind: 'folder'; dir?: string }
  | {
      kind: 's3';
      s3: { bucket: string; region: string; endpoint?: string; accessKeyId?: string; secretAccessKey?: string; forcePathStyle: boolean };
    };

/** Thrown when the environment is invalid; the message names every bad variable. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/**
 * Reads and validates the configuration from `env` (empty strings count as unset).
 * @throws ConfigError naming each variable that is wrong.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  // Refused rather than ignored: an operator who set 7 days in seconds would otherwise get 24 h.
  if (present.RESULT_TTL_S !== undefined) {
    throw new ConfigError('invalid configuration:\n  RESULT_TTL_S: replaced by RESULT_TTL_HOURS (hours, default 24); set that instead');
  }
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const e = parsed.data;
  if (e.BLOB_STORE === 's3' && !e.S3_BUCKET) throw new ConfigError('invalid configuration:\n  S3_BUCKET: required when BLOB_STORE=s3');
  const executorPoolSize = e.EXECUTOR_POOL_SIZE ?? Math.max(2, os.availableParallelism());
  return Object.freeze({
    redisUrl: e.REDIS_URL,
    dataDir: path.resolve(e.AGENTDB_DATA_DIR),
    prefix: e.AGENTDB_PREFIX,
    shardCount: e.SHARD_COUNT,
    port: e.PORT,
    host: e.HOST,
    statementTimeoutMs: e.STATEMENT_TIMEOUT_MS,
    workerConcurrency: e.WORKER_CONCURRENCY,
    agentShardConcurrency: e.AGENT_SHARD_CONCURRENCY ?? Math.max(1, Math.floor(e.WORKER_CONCURRENCY / 4)),
    executorPoolSize,
    // More than the pool would mean no limit at all; say what is enforced.
    executorWorkspaceShare: Math.min(executorPoolSize, e.EXECUTOR_WORKSPACE_SHARE ?? Math.ceil(executorPoolSize / 2)),
    executorOverflow: e.EXECUTOR_OVERFLOW,
    executorLongMs: e.EXECUTOR_LONG_MS,
    leaseTtlMs: e.LEASE_TTL_MS,
    lockDurationMs: e.LOCK_DURATION_MS,
    stalledIntervalMs: e.STALLED_INTERVAL_MS,
    drainGraceMs: e.DRAIN_GRACE_MS,
    schedulerCheckMs: e.SCHEDULER_CHECK_MS,
    executorHeapLimitMb: e.EXECUTOR_HEAP_LIMIT_MB,
    handleCacheSize: e.HANDLE_CACHE_SIZE,
    maxResultBytes: e.MAX_RESULT_BYTES,
    maxOffloadBytes: e.MAX_OFFLOAD_BYTES,
    maxOffloadedBytesPerWorkspace: e.MAX_OFFLOADED_BYTES_PER_WORKSPACE,
    workspaceQuota: Object.freeze({
      ...(e.WORKSPACE_MAX_DATABASES > 0 ? { maxDatabases: e.WORKSPACE_MAX_DATABASES } : {}),
      ...(e.WORKSPACE_MAX_BYTES > 0 ? { maxBytes: e.WORKSPACE_MAX_BYTES } : {}),
    }),
    ...(e.METRICS_TOKEN ? { metricsToken: e.METRICS_TOKEN } : {}),
    workerMetricsPort: e.WORKER_METRICS_PORT,
    metricsTopWorkspaces: e.METRICS_TOP_WORKSPACES,
    maxCallBytes: e.MAX_CALL_BYTES,
    statementCacheBytes: e.STATEMENT_CACHE_BYTES,
    approvalTtlMs: e.APPROVAL_TTL_MS,
    rateLimits:
      e.RATE_LIMITS === 'off'
        ? false
        : Object.freeze({
            windowS: e.RATE_LIMIT_WINDOW_S,
            ...(e.RATE_LIMIT_WORKSPACE_CALLS ? { workspaceCalls: e.RATE_LIMIT_WORKSPACE_CALLS } : {}),
            ...(e.RATE_LIMIT_KEY_CALLS ? { keyCalls: e.RATE_LIMIT_KEY_CALLS } : {}),
          }),
    resultTtlS: e.RESULT_TTL_HOURS * 3600,
    resultTrimEveryS: e.RESULT_TRIM_EVERY_S,
    maxParkedCallBytes: e.MAX_PARKED_CALL_BYTES,
    approvalEffectRows: e.APPROVAL_EFFECT_ROWS,
    redisBytesPerWorkspace: e.REDIS_BYTES_PER_WORKSPACE,
    redisMemoryHeadroomPercent: e.REDIS_MEMORY_HEADROOM_PERCENT,
    maintenanceCron: e.MAINTENANCE_CRON,
    scheduleTz: e.SCHEDULE_TZ,
    usageRetentionDays: e.USAGE_RETENTION_DAYS,
    approvalRetentionDays: e.APPROVAL_RETENTION_DAYS,
    blob: blobConfig(e),
    backupCron: e.BACKUP_CRON,
    backupTz: e.BACKUP_TZ,
    ...(e.HISTORY_CAPTURE === 'on'
      ? {
          history: Object.freeze({
            checkpointBytes: e.HISTORY_CHECKPOINT_BYTES,
            retentionDays: e.HISTORY_RETENTION_DAYS,
            maxBytesPerDb: e.HISTORY_MAX_BYTES_PER_DB,
            maxBehindBytes: e.HISTORY_MAX_BEHIND_BYTES,
            asOfKeepMs: e.AS_OF_KEEP_MINUTES * 60_000,
          }),
        }
      : {}),
    historyRetentionDays: e.HISTORY_RETENTION_DAYS,
    historySnapshotCron: e.HISTORY_SNAPSHOT_CRON,
    historyPruneCron: e.HISTORY_PRUNE_CRON,
    logLevel: e.LOG_LEVEL,
    httpWaitMs: e.HTTP_WAIT_MS,
    httpConnections: Object.freeze({
      requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS,
      perAddress: e.HTTP_CONNECTIONS_PER_ADDRESS,
      total: e.HTTP_MAX_CONNECTIONS,
    }),
    exportBounds: Object.freeze({ perMember: e.EXPORTS_PER_MEMBER, perWorkspace: e.EXPORTS_PER_WORKSPACE, total: e.EXPORTS_MAX }),
    mcpApprovalWaitMs: e.MCP_APPROVAL_WAIT_MS,
    mcpAllowedOrigins: Object.freeze(e.MCP_ALLOWED_ORIGINS),
    mcpAllowedHosts: e.MCP_ALLOWED_HOSTS === '*' ? '*' : Object.freeze(e.MCP_ALLOWED_HOSTS),
    webSessionTtlS: e.WEB_SESSION_TTL_S,
    ...(e.OAUTH === 'on'
      ? {
          oauth: Object.freeze({
            accessTtlS: e.OAUTH_ACCESS_TOKEN_TTL_S,
            refreshTtlS: e.OAUTH_REFRESH_TOKEN_TTL_S,
            unconsentedClientsMax: e.OAUTH_UNCONSENTED_CLIENTS_MAX,
            tokenRequestsPerMinute: e.OAUTH_TOKEN_REQUESTS_PER_MINUTE,
          }),
        }
      : {}),
    ...(e.PUBLIC_URL ? { publicUrl: e.PUBLIC_URL.replace(/\/+$/, '') } : {}),
    keyCacheTtlMs: e.KEY_CACHE_TTL_MS,
    tracing: e.TRACING === 'on',
    trustProxy: e.TRUST_PROXY,
    ...(e.AGENTDB_MEMBER_KEY ? { memberKey: e.AGENTDB_MEMBER_KEY } : {}),
    ...(e.AGENTDB_KEY ? { mcpKey: e.AGENTDB_KEY } : {}),
  });
}

function blobConfig(e: z.infer<typeof envSchema>): BlobConfig {
  if (e.BLOB_STORE === 'folder') return { kind: 'folder', ...(e.BLOB_DIR ? { dir: path.resolve(e.BLOB_DIR) } : {}) };
  return {
    kind: 's3',
    s3: {
      bucket: e.S3_BUCKET!,
      region: e.S3_REGION,
      forcePathStyle: e.S3_FORCE_PATH_STYLE,
      ...(e.S3_ENDPOINT ? { endpoint: e.S3_ENDPOINT } : {}),
      ...(e.S3_ACCESS_KEY_ID ? { accessKeyId: e.S3_ACCESS_KEY_ID } : {}),
      ...(e.S3_SECRET_ACCESS_KEY ? { secretAccessKey: e.S3_SECRET_ACCESS_KEY } : {}),
    },
  };
}
