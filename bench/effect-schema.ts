// What a parked write's preview costs against the database's schema (R10's leftover): the preview
// made temporary triggers and logs inside a transaction it rolls back, and SQLite resets every
// schema of the connection on that rollback, so the next statement parsed every CREATE TABLE
// again (since session 38, R13, they are made and dropped in transactions that commit). A one-row insert into a narrow table, beside `tables` tables of `columns` columns each:
// the plain write and its preview taking turns (pairs), CPU-bound, on the connection an executor
// child holds. Run: `node --import tsx bench/effect-schema.ts [runs]`.
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

export interface SchemaCost {
  tables: number;
  columns: number;
  /** Medians, ms: the write committed; its preview (run, read, rolled back). */
  plainMs: number;
  previewMs: number;
  /** The write committed right after a preview: it pays the re-parse the rollback left. */
  afterPreviewMs: number;
}

export function benchEffectSchema(shapes: readonly [number, number][], runs = 9): SchemaCost[] {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-effect-schema-'));
  const handles = new HandleCache({ size: 2 });
  const limits = { ...PLAN_LIMITS.enterprise, maxTables: 1000 };
  let call = 0;
  try {
    return shapes.map(([tables, columns]) => {
      const t: DbTarget = { id: `bench/s${tables}x${columns}`, path: databasePath(dataDir, 'bench', `s${tables}x${columns}`, 0), shard: 0, limits };
      const db = handles.open(t, 'write');
      const cols = Array.from({ length: columns }, (_, i) => `c${i} TEXT`).join(', ');
      for (let i = 0; i < tables; i++) write(db, `CREATE TABLE w${i} (id INTEGER PRIMARY KEY, ${cols})`, [], `c${++call}`, limits);
      write(db, 'CREATE TABLE target (id INTEGER PRIMARY KEY, v TEXT)', [], `c${++call}`, limits);
      const sql = 'INSERT INTO target (v) VALUES (?)';
      const fx = { maxRows: 50, maxBytes: 64 * 1024 };
      const plain: number[] = [];
      const preview: number[] = [];
      const after: number[] = [];
      const timed = (into: number[], fn: () => void) => {
        const start = process.cpuUsage();
        fn();
        const used = process.cpuUsage(start);
        into.push((used.user + used.system) / 1000);
      };
      for (let i = 0; i < runs; i++) {
        timed(plain, () => write(db, sql, ['x'], `c${++call}`, limits));
        timed(preview, () => previewEffect(db, sql, ['x'], limits, fx));
        timed(after, () => write(db, sql, ['x'], `c${++call}`, limits));
      }
      const median = (ms: number[]) =>
        round(
          quantile(
            ms.sort((a, b) => a - b),
            0.5,
          ),
          2,
        );
      return { tables, columns, plainMs: median(plain), previewMs: median(preview), afterPreviewMs: median(after) };
    });
  } finally {
    handles.closeAll();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const runs = Number(process.argv[2] ?? 9);
  const shapes: [number, number][] = [
    [1, 10],
    [1, 200],
    [50, 10],
    [50, 200],
    [500, 10],
    [500, 200],
  ];
  for (const c of benchEffectSchema(shapes, runs)) {
    console.log(
      `${c.tables} tables × ${c.columns} columns: plain write ${c.plainMs} ms CPU; preview ${c.previewMs} ms (×${round(c.previewMs / c.plainMs, 1)}); the write after a preview ${c.afterPreviewMs} ms`,
    );
  }
}
