// What a parked write's effect costs (issue 29): the time to compute it at parking (a preview
// run in a transaction always rolled back, with temporary triggers recording every row) and to
// compute it again in the approved run, against running the same write plainly. On the database's
// own connection, as the executor child does it: no queue, so only the effect's own cost counts.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { databasePath } from '../src/contracts/database-id.ts';
import type { DbTarget } from '../src/executor/executor-protocol.ts';
import { PLAN_LIMITS } from '../src/policy/plan-limits.ts';
import { HandleCache } from '../src/sqlite/handle-cache.ts';
import { previewEffect } from '../src/sqlite/sqlite-effect-preview.ts';
import { write } from '../src/sqlite/sqlite-write.ts';
import { quantile, round } from './stats.ts';

/** One size's figures, medians in ms. */
export interface EffectCost {
  rows: number;
  /** The write alone, committed. */
  plainMs: number;
  /** Parking's preview: the write run and rolled back, its effect read (50 rows kept). */
  previewMs: number;
  /** The approved run: the write with its effect recorded and compared, committed. */
  boundMs: number;
  /** previewMs / plainMs and boundMs / plainMs. */
  previewRatio: number;
  boundRatio: number;
}

/** For each size, an UPDATE of that many rows of a table of 2 × that many, `runs` times each way. */
export function benchEffect(sizes: readonly number[] = [1, 100, 10_000], runs = 15): EffectCost[] {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-effect-'));
  const handles = new HandleCache({ size: 4 });
  let call = 0;
  try {
    return sizes.map((rows) => {
      const t: DbTarget = { id: `bench/e${rows}`, path: databasePath(dataDir, 'bench', `e${rows}`, 0), shard: 0, limits: PLAN_LIMITS.pro };
      const db = handles.open(t, 'write');
      write(db, 'CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT, stage TEXT, n INTEGER)', [], `c${++call}`, t.limits);
      write(
        db,
        `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${2 * rows}) INSERT INTO leads SELECT i, 'lead' || i || '@example.com', 'new', 0 FROM s`,
        [],
        `c${++call}`,
        t.limits,
      );
      const sql = 'UPDATE leads SET n = n + 1, stage = ? WHERE id <= ?';
      const params = ['emailed', rows];
      const limits = { maxRows: 50, maxBytes: 64 * 1024 };
      // Each timed step may take an untimed one before it (the preview that gives a bound run its digest).
      const time = (fn: () => void, before?: () => void) => {
        const ms: number[] = [];
        for (let i = 0; i < runs; i++) {
          before?.();
          const start = performance.now();
          fn();
          ms.push(performance.now() - start);
        }
        return round(
          quantile(
            ms.sort((a, b) => a - b),
            0.5,
          ),
          3,
        );
      };
      const plainMs = time(() => write(db, sql, params, `c${++call}`, t.limits));
      const previewMs = time(() => previewEffect(db, sql, params, t.limits, limits));
      let digest = '';
      const boundMs = time(
        () => write(db, sql, params, `c${++call}`, t.limits, undefined, undefined, { digest, limits }),
        () => {
          digest = previewEffect(db, sql, params, t.limits, limits).digest;
        },
      );
      return { rows, plainMs, previewMs, boundMs, previewRatio: round(previewMs / plainMs, 2), boundRatio: round(boundMs / plainMs, 2) };
    });
  } finally {
    handles.closeAll();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** The scenario's lines. */
export function printEffect(costs: EffectCost[]): void {
  for (const c of costs) {
    console.log(
      `effect of a parked write, ${c.rows} rows changed: plain write ${c.plainMs} ms; preview at parking ${c.previewMs} ms (×${c.previewRatio}); bound run ${c.boundMs} ms (×${c.boundRatio})`,
    );
  }
}
