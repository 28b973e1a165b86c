import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome, ExecRequest } from '../../src/executor/executor-protocol.ts';
import { PLAN_LIMITS, type PlanLimits } from '../../src/policy/plan-limits.ts';
import { builtExecutorChild } from './built-child.ts';
import { pastMs } from './history.ts';

/**
 * An executor pool of two children with history capture on, over `dataDir`, as the history
 * tests use it: `handleCacheSize` and `checkpointBytes` set how often handles close and WALs
 * start over, which is what those tests vary.
 */
export async function historyPool(dataDir: string, opts: { handleCacheSize: number; checkpointBytes: number; settle?: false }): Promise<ExecutorPool> {
  const pool = new (opts.settle === false ? ExecutorPool : SettlingPool)({
    size: 2,
    workspaceShare: 2,
    dataDir,
    statementTimeoutMs: 30_000,
    heapLimitMb: 256,
    handleCacheSize: opts.handleCacheSize,
    maxResultBytes: 1024 * 1024,
    history: { checkpointBytes: opts.checkpointBytes, retentionDays: 30 },
    child: builtExecutorChild,
  });
  await pool.start();
  return pool;
}

/**
 * A write is answered before its frames are copied into history (the copy follows at once, under
 * the write lock, so nothing can come between; see `HistoryCapture.afterCommit`). These tests
 * read the history files themselves right after answers, so a write waits for its copy too, as a
 * restore or a fork does before reading. What answering first changes is tested on its own
 * (history-answer-first.test.ts).
 */
class SettlingPool extends ExecutorPool {
  override async run(req: ExecRequest): Promise<ExecOutcome> {
    const out = await super.run(req);
    if (out.ok && (req.op === 'write' || req.op === 'drop')) {
      const settled = await super.run({ op: 'capture', db: req.db });
      if (!settled.ok) throw new Error(`capture after a write failed: ${settled.error.code}: ${settled.error.detail}`);
    }
    return out;
  }
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

/**
 * A history pool over a temporary folder (`prefix` names it) for the tests of one file: started
 * before them and stopped, folder removed, after them; `set` receives both once started.
 */
export function withHistoryPool(
  prefix: string,
  opts: { handleCacheSize: number; checkpointBytes: number },
  set: (dataDir: string, pool: ExecutorPool) => void,
): void {
  let dataDir: string | undefined;
  let pool: ExecutorPool | undefined;
  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    pool = await historyPool(dataDir, opts);
    set(dataDir, pool);
  });
  afterAll(async () => {
    await pool?.stop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });
}

/** What {@link withHistoryPoolTarget} makes: the pool, its folder, the one database and a write to it. */
export interface HistoryPoolTarget {
  dataDir: string;
  pool: ExecutorPool;
  db: DbTarget;
  /** Writes `sql` on `db` with a fresh call key; an error outcome throws. */
  write(sql: string): Promise<unknown>;
}

/**
 * {@link withHistoryPool} with one database, `target.id` (`workspace/agent`) on the shard it has
 * among `target.shards` and `target.limits`, as the ops' tests that call a handler directly use it.
 */
export function withHistoryPoolTarget(
  prefix: string,
  opts: { handleCacheSize: number; checkpointBytes: number },
  target: { id: string; shards: number; limits: PlanLimits },
  set: (t: HistoryPoolTarget) => void,
): void {
  withHistoryPool(prefix, opts, (dataDir, pool) => {
    const [ws, agent] = target.id.split('/');
    const shard = shardOf(target.id, target.shards);
    const db: DbTarget = { id: target.id, path: databasePath(dataDir, ws!, agent, shard), shard, limits: target.limits };
    const write = (sql: string) => mustRun(pool, { op: 'write', db, sql, params: [], callKey: `k-${Math.random()}` } as ExecRequest);
    set({ dataDir, pool, db, write });
  });
}

/** The calls the history tests make on the pool `get` answers: an operator, writes with fresh call keys, restores, a table then a moment. */
export function historyCalls(get: () => ExecutorPool) {
  let seq = 0;
  const by = { who: 'operator:test', via: 'operator' as const };
  const ok = (req: ExecRequest): Promise<any> => mustRun(get(), req);
  const write = (db: DbTarget, sql: string, params: (string | number | null)[] = []) => ok({ op: 'write', db, sql, params, callKey: `k${++seq}` });
  const restore = (db: DbTarget, args: { at?: number; undo?: string }): Promise<ExecOutcome> =>
    get().run({ op: 'restore', db, ...args, by, timeoutMs: 60_000 });
  /** Table `t` of 400 rows of 500 bytes on `db`; answers the moment after them, the clock past it. */
  const rowsThenMoment = async (db: DbTarget): Promise<number> => {
    await write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    await write(
      db,
      "INSERT INTO t(v) SELECT printf('%.500c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) SELECT i FROM n)",
    );
    const at = Date.now();
    pastMs(at);
    return at;
  };
  return { by, ok, write, restore, rowsThenMoment, nextKey: () => `k${++seq}` };
}
