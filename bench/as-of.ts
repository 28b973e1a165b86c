// What reading the past in place costs (issue 29): a read with `as_of` the first time its moment is
// read (restored from history into a kept file: the snapshot copied, then its commits applied) and
// once kept, against the same read of the live database. Through an executor pool with history on,
// as a shard worker runs it: the child's work and its round trip, without the queue.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { databasePath } from '../src/contracts/database-id.ts';
import { ExecutorPool } from '../src/executor/executor-pool.ts';
import type { DbTarget, ExecRequest } from '../src/executor/executor-protocol.ts';
import { historyRange, planRestore } from '../src/history/restore-plan.ts';
import { momentBytes } from '../src/history/as-of-cache.ts';
import { localSource } from '../src/history/history-files.ts';
import { PLAN_LIMITS } from '../src/policy/plan-limits.ts';
import { quantile, round } from './stats.ts';

/** One database size's figures, medians in ms. */
export interface AsOfCost {
  rows: number;
  /** The database's size, MB, and the commits after its snapshot a moment replays (about half). */
  dbMb: number;
  commits: number;
  /** The read of the live database. */
  liveMs: number;
  /** The read with `as_of` at a moment not kept yet: restored, then read. */
  firstMs: number;
  /** The read with `as_of` at a moment kept. */
  cachedMs: number;
  firstRatio: number;
  cachedRatio: number;
}

const median = (xs: number[]) =>
  round(
    quantile(
      [...xs].sort((a, b) => a - b),
      0.5,
    ),
    3,
  );

/** For each size: a table of that many rows, `commits` small updates after it, then `runs` reads each way. */
export async function benchAsOf(sizes: readonly number[] = [10_000, 100_000], commits = 200, runs = 15): Promise<AsOfCost[]> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-as-of-'));
  const pool = new ExecutorPool({
    size: 1,
    workspaceShare: 1,
    dataDir,
    statementTimeoutMs: 120_000,
    heapLimitMb: 256,
    handleCacheSize: 8,
    maxResultBytes: 1024 * 1024,
    history: { checkpointBytes: 4 * 1024 * 1024, retentionDays: 30 },
  });
  await pool.start();
  let call = 0;
  const run = async (req: ExecRequest) => {
    const out = await pool.run(req);
    if (!out.ok) throw new Error(`${out.error.code}: ${out.error.detail}`);
    return out;
  };
  try {
    const out: AsOfCost[] = [];
    for (const rows of sizes) {
      const db: DbTarget = { id: `bench/p${rows}`, path: databasePath(dataDir, 'bench', `p${rows}`, 0), shard: 0, limits: PLAN_LIMITS.enterprise };
      const write = (sql: string, params: (string | number)[] = []) => run({ op: 'write', db, sql, params, callKey: `bench.p.c${++call}` });
      await write('CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT, stage TEXT, n INTEGER)');
      await write(
        `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${rows}) INSERT INTO leads SELECT i, 'lead' || i || '@example.com', 'new', 0 FROM s`,
      );
      // Moments to read: after each of the commits, so every first read restores a moment of its own.
      const moments: number[] = [];
      for (let i = 0; i < commits; i++) {
        await write('UPDATE leads SET n = n + 1, stage = ? WHERE id = ?', [`s${i}`, 1 + ((i * 7919) % rows)]);
        await run({ op: 'capture', db });
        moments.push(historyRange(localSource(dataDir, db.id)).latest!);
      }
      const read = (asOf?: number): ExecRequest => ({
        op: 'query',
        db,
        sql: 'SELECT id, email, stage, n FROM leads WHERE id = ?',
        params: [rows / 2],
        maxRows: 10,
        ...(asOf === undefined ? {} : { asOf: { target: { at: asOf }, build: true as const } }),
      });
      const time = async (req: () => ExecRequest) => {
        const ms: number[] = [];
        for (let i = 0; i < runs; i++) {
          const r = req();
          const start = performance.now();
          await run(r);
          ms.push(performance.now() - start);
        }
        return median(ms);
      };
      const liveMs = await time(() => read());
      // Distinct moments around the middle of the commits: each replays about half of them.
      let k = 0;
      const firstMs = await time(() => read(moments[Math.floor(commits / 2) - runs + k++]!));
      const kept = moments[Math.floor(commits / 2) - runs]!;
      const cachedMs = await time(() => read(kept));
      out.push({
        rows,
        dbMb: round(momentBytes(planRestore(localSource(dataDir, db.id), { at: kept })) / 1e6, 1),
        commits: Math.floor(commits / 2),
        liveMs,
        firstMs,
        cachedMs,
        firstRatio: round(firstMs / liveMs, 1),
        cachedRatio: round(cachedMs / liveMs, 1),
      });
    }
    return out;
  } finally {
    await pool.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** The scenario's lines. */
export function printAsOf(costs: AsOfCost[]): void {
  for (const c of costs) {
    console.log(
      `as_of read (PK lookup), ${c.rows} rows (~${c.dbMb} MB), moment ~${c.commits} commits past its snapshot: live ${c.liveMs} ms; first read of a moment ${c.firstMs} ms (×${c.firstRatio}); kept ${c.cachedMs} ms (×${c.cachedRatio})`,
    );
  }
}
