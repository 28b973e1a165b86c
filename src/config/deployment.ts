// Where and how a process runs: Redis, the data folder, the key prefix, shards, the address it
// listens on, logs, traces, metrics, and the keys the CLI acts with. A part of the one schema
// (see src/config.ts): each variable's entry, its Config field and their mapping, together.

import path from 'node:path';
import { z } from 'zod';
import { int } from './env-checks.ts';

/** What REDIS_URL (and a client's `redisUrl`) must look like. */
export const REDIS_URL_PATTERN = /^rediss?:\/\//;
/** What AGENTDB_PREFIX (and a client's `prefix`) must look like: it goes into every Redis key. */
export const PREFIX_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

const deploymentSchema = z.object({
  REDIS_URL: z.string().regex(REDIS_URL_PATTERN, 'must be a redis:// or rediss:// URL').default('redis://127.0.0.1:6379'),
  AGENTDB_DATA_DIR: z.string().min(1).default('./data'),
  /** Prefix of every Redis key and queue, so several deployments (and tests) share one Redis. */
  AGENTDB_PREFIX: z.string().regex(PREFIX_PATTERN, 'letters, digits, _ and - only (1 to 64)').default('agentdb'),
  SHARD_COUNT: int(1, 4096, 16),
  PORT: int(0, 65535, 7070),
  HOST: z.string().min(1).default('127.0.0.1'),
  /** The bearer token `GET /metrics` asks for; unset, /metrics is off (it names workspaces). */
  METRICS_TOKEN: z.string().min(16).optional(),
  /**
   * The port `agentdb worker` serves `GET /metrics` on (its own calls, executor children, capture
   * lag, refusals), on HOST, behind METRICS_TOKEN; 0: none. `agentdb start` serves it on PORT.
   */
  WORKER_METRICS_PORT: int(0, 65_535, 0),
  /**
   * Whether `agentdb start` runs shard workers beside its HTTP API (`on`); `off`: the API and the
   * scheduler only, the shards owned by `agentdb worker` processes (as `start --http-only`).
   */
  START_WORKERS: z.enum(['on', 'off']).default('on'),
  /** How many workspaces `/metrics` shows the Redis bytes of, the most first: bounds its labels. */
  METRICS_TOP_WORKSPACES: int(0, 1000, 20),
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
});

/** This part's entries of the environment's schema, which `loadConfig` joins. */
export const deploymentEnv = deploymentSchema.shape;

/** This part's fields of the frozen `Config`. */
export interface DeploymentConfig {
  /** REDIS_URL: the Redis every process of a deployment shares. */
  readonly redisUrl: string;
  /** AGENTDB_DATA_DIR: SQLite files under `shards/<shard>/`, the call-id ledger under `call-ids/`. */
  readonly dataDir: string;
  /** AGENTDB_PREFIX: the start of every Redis key and queue name. */
  readonly prefix: string;
  /** SHARD_COUNT: the same for every process of a deployment (a database's shard follows from it). */
  readonly shardCount: number;
  /** PORT: the HTTP port of `agentdb start`. */
  readonly port: number;
  /** HOST: the address HTTP (and a worker's metrics) listen on. */
  readonly host: string;
  /** The bearer token `GET /metrics` asks for (METRICS_TOKEN); absent, the route answers NOT_FOUND. */
  readonly metricsToken?: string;
  /** WORKER_METRICS_PORT: 0 for none. */
  readonly workerMetricsPort: number;
  /** METRICS_TOP_WORKSPACES. */
  readonly metricsTopWorkspaces: number;
  /** START_WORKERS=on: `agentdb start` owns shards too; off, it serves HTTP only. */
  readonly startWorkers: boolean;
  /** LOG_LEVEL: pino's level for the JSON logs on stderr. */
  readonly logLevel: z.infer<typeof deploymentSchema>['LOG_LEVEL'];
  /** A secret: never logged. */
  readonly memberKey?: string;
  /** AGENTDB_KEY, for `agentdb mcp --stdio`. A secret: never logged. */
  readonly mcpKey?: string;
  /** TRACING=on: spans on the registered OpenTelemetry tracer provider (src/tracing.ts). */
  readonly tracing: boolean;
}

/** This part's fields of `Config`, from its variables as validated. */
export function deploymentConfig(e: z.infer<typeof deploymentSchema>): DeploymentConfig {
  return {
    redisUrl: e.REDIS_URL,
    dataDir: path.resolve(e.AGENTDB_DATA_DIR),
    prefix: e.AGENTDB_PREFIX,
    shardCount: e.SHARD_COUNT,
    port: e.PORT,
    host: e.HOST,
    ...(e.METRICS_TOKEN ? { metricsToken: e.METRICS_TOKEN } : {}),
    workerMetricsPort: e.WORKER_METRICS_PORT,
    metricsTopWorkspaces: e.METRICS_TOP_WORKSPACES,
    startWorkers: e.START_WORKERS === 'on',
    logLevel: e.LOG_LEVEL,
    tracing: e.TRACING === 'on',
    ...(e.AGENTDB_MEMBER_KEY ? { memberKey: e.AGENTDB_MEMBER_KEY } : {}),
    ...(e.AGENTDB_KEY ? { mcpKey: e.AGENTDB_KEY } : {}),
  };
}
