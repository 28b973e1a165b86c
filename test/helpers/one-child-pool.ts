import { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { ExecutorPoolOptions } from '../../src/executor/executor-options.ts';
import { builtExecutorChild } from './built-child.ts';

/**
 * A started pool of one executor child over `dataDir`, with history on (64 KiB checkpoints, 30
 * days): what the full-disk and history-bound tests run their statements through, so that each
 * failed copy is seen by the child that answers next. `history` adds to the history options.
 */
export async function oneChildPool(dataDir: string, history: Partial<NonNullable<ExecutorPoolOptions['history']>> = {}): Promise<ExecutorPool> {
  const pool = new ExecutorPool({
    size: 1,
    workspaceShare: 1,
    dataDir,
    statementTimeoutMs: 30_000,
    heapLimitMb: 256,
    handleCacheSize: 4,
    maxResultBytes: 1024 * 1024,
    history: { checkpointBytes: 64 * 1024, retentionDays: 30, ...history },
    child: builtExecutorChild,
  });
  await pool.start();
  return pool;
}
