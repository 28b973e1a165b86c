import { ExecutorPool } from '../executor/executor-pool.ts';
import type { Config } from '../config.ts';
import type { ChildModule } from '../executor/child-module.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import type { OutsideKillCounts } from '../executor/outside-kills.ts';

/**
 * A worker process's pool of executor children, from the service's settings: its size and fair
 * share, the overflow lane, the limits each statement runs under, and history capture.
 */
export function workerExecutorPool(opts: {
  config: Config;
  logger: Logger;
  executorChild?: ChildModule;
  metrics?: Metrics;
  /** Where statements killed from outside are remembered beyond this process (see `OutsideKillCounts`). */
  outsideKills?: OutsideKillCounts;
}): ExecutorPool {
  const { config } = opts;
  return new ExecutorPool({
    size: config.executorPoolSize,
    workspaceShare: config.executorWorkspaceShare,
    overflow: config.executorOverflow,
    longMs: config.executorLongMs,
    dataDir: config.dataDir,
    statementTimeoutMs: config.statementTimeoutMs,
    heapLimitMb: config.executorHeapLimitMb,
    handleCacheSize: config.handleCacheSize,
    maxResultBytes: config.maxResultBytes,
    maxOffloadBytes: config.maxOffloadBytes,
    statementCacheBytes: config.statementCacheBytes,
    ...(config.history ? { history: config.history } : {}),
    ...(opts.executorChild ? { child: opts.executorChild } : {}),
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
    ...(opts.outsideKills ? { outsideKills: opts.outsideKills } : {}),
    logger: opts.logger,
  });
}
