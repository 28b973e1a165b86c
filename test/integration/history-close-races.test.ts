import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecRequest } from '../../src/executor/executor-protocol.ts';
import { integrity, pastMs } from '../helpers/history.ts';
import { historyPool, historyTarget, mustRun } from '../helpers/history-pool.ts';

// Hostile review: lines of several databases move between two children with one handle each,
// so a child closes a stale handle of a database (capture before close, checkpoint, seal) while
// the other child writes it. Every commit must come back from history, at its own moment.
const scratch = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
let dataDir: string;
let pool: ExecutorPool;
const DBS = 5;
const WRITES = Number(process.env.RACE_WRITES ?? 120);

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(scratch, 'agentdb-close-races-'));
  pool = await historyPool(dataDir, { handleCacheSize: 1, checkpointBytes: 16 * 1024 });
});
afterAll(async () => {
  await pool.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const target = (id: string): DbTarget => historyTarget(dataDir, id);
let seq = 0;
const ok = async (req: ExecRequest): Promise<void> => void (await mustRun(pool, req));

/** Writes `n` numbered commits, some reusing freed pages; returns the moment after each. */
async function drive(db: DbTarget, n: number): Promise<number[]> {
  const after: number[] = [];
  await ok({ op: 'write', db, sql: 'CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)', params: [], callKey: `c${++seq}` });
  pastMs(Date.now());
  for (let k = 1; k <= n; k++) {
    const sql = k % 7 === 0 ? 'DELETE FROM t WHERE k % 3 = 0 AND k < ?' : 'INSERT INTO t(k, v) VALUES (?, hex(randomblob(700)))';
    await ok({ op: 'write', db, sql, params: [k], callKey: `c${++seq}` });
    const t = Date.now();
    after.push(t);
    pastMs(t);
  }
  return after;
}

function expected(k: number): number[] {
  const rows: number[] = [];
  for (let i = 1; i <= k; i++) {
    if (i % 7 === 0) {
      for (let j = rows.length - 1; j >= 0; j--) if (rows[j]! % 3 === 0 && rows[j]! < i) rows.splice(j, 1);
    } else rows.push(i);
  }
  return rows;
}

describe('history while children close stale handles of a database another child writes', () => {
  it('restores every commit exactly', async () => {
    const dbs = Array.from({ length: DBS }, (_, i) => target(`race/a${i}`));
    const times = await Promise.all(dbs.map((db) => drive(db, WRITES)));
    await ok({ op: 'evict', shards: [0] });
    const bad: string[] = [];
    for (const [d, db] of dbs.entries()) {
      for (let k = 1; k <= WRITES; k += 1) {
        const file = path.join(dataDir, `check-${d}-${k}.sqlite`);
        try {
          buildRestore(planRestore(localSource(dataDir, db.id), { at: times[d]![k - 1]! }), file);
          const ic = integrity(file);
          const conn = new Database(file, { fileMustExist: true });
          const got = conn.prepare('SELECT k FROM t ORDER BY k').pluck().all() as number[];
          conn.close();
          if (ic !== 'ok' || JSON.stringify(got) !== JSON.stringify(expected(k))) bad.push(`${db.id}@${k}: ${ic} ${got.length} rows vs ${expected(k).length}`);
        } catch (err) {
          bad.push(`${db.id}@${k}: ${(err as Error).message}`);
        } finally {
          fs.rmSync(file, { force: true });
        }
      }
    }
    const gens = dbs.map((db) => fs.readdirSync(localSource(dataDir, db.id).generationsDir).length);
    console.log('generations per database', gens);
    expect(bad.slice(0, 10)).toEqual([]);
  }, 300_000);
});
