import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { loadConfig, type Config } from '../../src/config.ts';
import { AgentDbClient } from '../../src/calls/client.ts';
import type { AgentDbClientOptions } from '../../src/calls/client-options.ts';
import { ShardWorkerPool, type ShardWorkerPoolOptions } from '../../src/shards/shard-worker-pool.ts';
import { builtExecutorChild } from './built-child.ts';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A private corner of the shared Redis and a temp data folder, for one test file. */
export interface Sandbox {
  config: Config;
  dataDir: string;
  env: Record<string, string>;
  /** A client of the sandbox; `opts` adds to (or replaces) its options, e.g. `rateLimits`. */
  client(opts?: AgentDbClientOptions): AgentDbClient;
  /** A started worker pool; `opts` adds the pool's own options that are no setting (`writesVerdictKeepMs`). */
  pool(shards?: number[], overrides?: Record<string, string>, opts?: Pick<ShardWorkerPoolOptions, 'writesVerdictKeepMs' | 'ops'>): Promise<ShardWorkerPool>;
  cleanup(): Promise<void>;
}

/** Creates a sandbox: its own key prefix, its own data folder, fast leases and lock timeouts. */
export function sandbox(env: Record<string, string> = {}): Sandbox {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-test-'));
  const fullEnv: Record<string, string> = {
    REDIS_URL,
    AGENTDB_DATA_DIR: dataDir,
    AGENTDB_PREFIX: `t-${randomUUID().slice(0, 12)}`,
    SHARD_COUNT: '4',
    LEASE_TTL_MS: '1500',
    LOCK_DURATION_MS: '2000',
    STALLED_INTERVAL_MS: '1000',
    LOG_LEVEL: 'silent',
    // Off unless a test turns them on (rate-limits.test.ts): a file makes hundreds of calls a
    // minute in one workspace, past the plans' rates, and would be refused RATE_LIMITED.
    RATE_LIMITS: 'off',
    ...env,
  };
  const config = loadConfig(fullEnv);
  const clients: AgentDbClient[] = [];
  const pools: ShardWorkerPool[] = [];
  return {
    config,
    dataDir,
    env: fullEnv,
    client(opts = {}) {
      const c = new AgentDbClient({
        redisUrl: config.redisUrl,
        prefix: config.prefix,
        shardCount: config.shardCount,
        maxCallBytes: config.maxCallBytes,
        resultTtlS: config.resultTtlS,
        approvalTtlMs: config.approvalTtlMs,
        redisBytesPerWorkspace: config.redisBytesPerWorkspace,
        redisMemoryHeadroomPercent: config.redisMemoryHeadroomPercent,
        rateLimits: config.rateLimits,
        tracing: config.tracing,
        ...opts,
      });
      clients.push(c);
      return c;
    },
    async pool(shards, overrides = {}, opts = {}) {
      const cfg = loadConfig({ ...fullEnv, ...overrides });
      const p = new ShardWorkerPool({
        config: cfg,
        shards: shards ?? Array.from({ length: cfg.shardCount }, (_, i) => i),
        logger: pino({ level: 'silent' }),
        executorChild: builtExecutorChild,
        ...opts,
      });
      pools.push(p);
      await p.start();
      return p;
    },
    async cleanup() {
      await Promise.all(clients.map((c) => c.close()));
      await Promise.all(pools.map((p) => p.stop().catch(() => undefined)));
      await deleteKeys(config.prefix);
      // A worker killed by its test leaves its executor children a second to close their
      // databases (and copy their history) before they die: retry while they still write.
      // Whole removals, not rmSync's maxRetries: on ENOTEMPTY that retries only the rmdir, never
      // looking again at what a child renamed into place meanwhile (a history generation), so
      // it failed every time in the pool's kill-under-load test.
      for (let attempt = 1; ; attempt++) {
        try {
          rmSync(dataDir, { recursive: true, force: true });
          break;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOTEMPTY' || attempt >= 20) throw err;
          await new Promise((r) => setTimeout(r, 250));
        }
      }
    },
  };
}

/** Deletes every Redis key under a prefix. */
export async function deleteKeys(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
