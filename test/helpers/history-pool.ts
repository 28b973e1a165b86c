import { databasePath } from '../../src/store/database-id.ts';
import { ExecutorPool } from '../../src/store/executor-pool.ts';
import type { DbTarget, ExecRequest } from '../../src/store/executor-protocol.ts';
import { PLAN_LIMITS } from '../../src/store/plan-limits.ts';

/**
 * An executor pool of two children with history capture on, over `dataDir`, as the history
 * tests use it: `handleCacheSize` and `checkpointBytes` set how often handles close and WALs
 * start over, which is what those tests vary.
 */
export async function historyPool(dataDir: string, opts: { handleCacheSize: number; checkpointBytes: number }): Promise<ExecutorPool> {
  const pool = new ExecutorPool({
    size: 2,
    workspaceShare: 2,
    dataDir,
    statementTimeoutMs: 30_000,
    heapLimitMb: 256,
    handleCacheSize: opts.handleCacheSize,
    maxResultBytes: 1024 * 1024,
    history: { checkpointBytes: opts.checkpointBytes, retentionDays: 30 },
  });
  await pool.start();
  return pool;
}

/** The database `workspace/agent` (or `workspace` for the shared one) of shard 0, on the enterprise plan. */
export function historyTarget(dataDir: string, id: string): DbTarget {
  const [ws, agent] = id.split('/');
  return { id, path: databasePath(dataDir, ws!, agent, 0), shard: 0, limits: PLAN_LIMITS.enterprise };
}

/** Runs `req`, answering its result; an error outcome throws with its code. */
export async function mustRun(pool: ExecutorPool, req: ExecRequest): Promise<unknown> {
  const out = await pool.run(req);
  if (!out.ok) throw new Error(`${out.error.code}: ${out.error.detail}`);
  return out.result;
}
