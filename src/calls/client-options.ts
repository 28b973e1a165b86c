import { z } from 'zod';
import { PREFIX_PATTERN, REDIS_URL_PATTERN } from '../config.ts';
import { describeIssues } from '../contracts/describe-issues.ts';
import { AgentDbError } from '../errors.ts';
import type { RateLimitSettings } from '../config.ts';
import type { Metrics } from '../metrics.ts';
import type { AwaitingAnswer, PendingAnswer } from './call-answers.ts';

const positiveInt = z.number().int().positive();

/**
 * The checks of an `AgentDbClient`'s options, the same the service's settings get (REDIS_URL,
 * AGENTDB_PREFIX, SHARD_COUNT …): a runtime's typo must fail where it is made, not later as a
 * call nobody answers (a prefix no worker listens under) or a connection retried forever.
 */
const clientOptions = z.looseObject({
  redisUrl: z
    .string()
    .refine((u) => REDIS_URL_PATTERN.test(u) && URL.canParse(u), 'must be a redis:// or rediss:// URL')
    .optional(),
  prefix: z.string().regex(PREFIX_PATTERN, 'letters, digits, _ and - only (1 to 64)').optional(),
  shardCount: z.number().int().min(1).max(4096).optional(),
  resultTtlS: positiveInt.optional(),
  approvalTtlMs: positiveInt.optional(),
  maxCallBytes: positiveInt.optional(),
  redisBytesPerWorkspace: z.number().int().min(0).optional(),
  redisMemoryHeadroomPercent: z.number().min(0).max(100).optional(),
  tracing: z.boolean().optional(),
});

/** @throws AgentDbError INVALID_ARGUMENTS naming each bad option, before anything connects. */
export function checkClientOptions(opts: unknown): void {
  const parsed = clientOptions.safeParse(opts ?? {});
  if (!parsed.success) throw new AgentDbError('INVALID_ARGUMENTS', `AgentDbClient: ${describeIssues(parsed.error.issues)}`);
}

/** Options of an {@link AgentDbClient}. */
export interface AgentDbClientOptions {
  /** Default `redis://127.0.0.1:6379`. */
  redisUrl?: string;
  /** The deployment's key prefix (`AGENTDB_PREFIX`), default `agentdb`. */
  prefix?: string;
  /**
   * The workers' `SHARD_COUNT`. Left out, the client reads the count the workers publish under
   * the prefix when they start (on its first call), or assumes 16 while none has started; given
   * one that differs from the published one, each call answers CONFIG_MISMATCH and sends nothing.
   */
  shardCount?: number;
  /** How long finished calls keep their result in Redis, in seconds (RESULT_TTL_HOURS; default 24 h). */
  resultTtlS?: number;
  /**
   * How long a parked call may wait for a person (`APPROVAL_TTL_MS`, default 24 h): with
   * `resultTtlS`, how long a caller's own call id stays taken (see {@link claimCallId}).
   */
  approvalTtlMs?: number;
  /**
   * The most a call's arguments may take as JSON (`MAX_CALL_BYTES`, default 1 MB); a larger
   * call answers CALL_TOO_LARGE and nothing is enqueued. Workers check it again.
   */
  maxCallBytes?: number;
  /**
   * Call rates per workspace and per key (RATE_LIMITS, RATE_LIMIT_*): by default the plans' rates
   * per minute (docs/operations.md "Rate limits"); `false` lets every call through. A call past
   * a budget answers RATE_LIMITED with `error.retryAfter` and enqueues nothing.
   */
  rateLimits?: RateLimitSettings | false;
  /** REDIS_BYTES_PER_WORKSPACE: what one workspace may hold in Redis; 0 (default): its plan's budget. */
  redisBytesPerWorkspace?: number;
  /** REDIS_MEMORY_HEADROOM_PERCENT (default 20): new calls are refused this close to Redis's maxmemory. */
  redisMemoryHeadroomPercent?: number;
  /**
   * Where the client counts the calls and lookups it refuses for a tenant bound
   * (`agentdb_quota_refusals_total{quota}`: `rate`, `redis`, `headroom`): a service's own
   * registry (`agentdb start` serves it at /metrics). Without it the client counts on one of its
   * own, {@link AgentDbClient.metrics}, which a runtime reads or serves as it likes.
   */
  metrics?: Metrics;
  /**
   * OpenTelemetry spans of each call (`execute_tool <tool>`, and BullMQ's `add` with the trace
   * carried in the job to the workers) on the tracer provider the process registered; default
   * off. Workers trace their side with TRACING=on.
   */
  tracing?: boolean;
}

/** Options of one call. */
export interface CallOptions {
  /**
   * `true` (default): resolve when the call has finished — run, rejected or expired — however
   * long a person takes. `false`: answer as soon as it has run or been parked for a person.
   */
  wait?: boolean;
  /** How long a worker may take to pick the call up before it is withdrawn (default 30 s). */
  timeoutMs?: number;
  /**
   * Told, for a waited call, each step it takes short of finishing, so a caller can say what
   * it waits for: `queued` once it is enqueued (with its call id), `awaiting_approval` (with the
   * approval) when it is parked for a person. The call goes on waiting either way.
   */
  onStatus?: (status: PendingAnswer | AwaitingAnswer) => void;
  /**
   * Gives the wait up when it aborts: the call stops being listened for at once (the last wait
   * on a call takes its look at the job with it), and the promise rejects with the signal's
   * reason, as `fetch` does. The call itself goes on.
   */
  signal?: AbortSignal;
  /**
   * The caller's W3C trace context (`00-<trace id>-<span id>-<flags>`): with tracing on, the
   * call's spans continue that trace. Without it they continue the active span, if any.
   */
  traceparent?: string;
  /** The W3C `tracestate` going with {@link CallOptions.traceparent}. */
  tracestate?: string;
}
