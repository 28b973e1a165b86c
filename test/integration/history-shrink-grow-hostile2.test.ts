import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import { dumpHash, pastMs } from '../helpers/history.ts';
import { historyCalls, historyTarget, withHistoryPool } from '../helpers/history-pool.ts';

let dataDir: string;
let pool: ExecutorPool;
withHistoryPool('agentdb-shrinkgrow-', { handleCacheSize: 4, checkpointBytes: 64 * 1024 * 1024 }, (d, p) => {
  dataDir = d;
  pool = p;
});
const { by, ok, nextKey } = historyCalls(() => pool);
const pages = (file: string) => {
  const d = new Database(file, { readonly: true });
  try {
    return d.pragma('page_count', { simple: true }) as number;
  } finally {
    d.close();
  }
};

describe('a database that shrinks below its snapshot, then grows again, within one plan', () => {
  it('restores every moment exactly: in place, by fork, and by the engine alone', async () => {
    const db = historyTarget(dataDir, 'sg/main');
    const write = (sql: string) => ok({ op: 'write', db, sql, params: [], callKey: nextKey() });
    const rows = (n: number, c: string) =>
      write(
        `INSERT INTO t(v) SELECT printf('%.1500c', '${c}') || i FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${n}) SELECT i FROM n)`,
      );
    await write('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    await rows(200, 'a');
    const small = Date.now();
    pastMs(small);
    await rows(800, 'b');
    await ok({ op: 'snapshot', db, reason: 'manual' });
    const big = pages(db.path);
    // Shrinks: back to the small state (a restore in place; within the generation or not).
    expect((await pool.run({ op: 'restore', db, at: small, by, timeoutMs: 60_000 })).ok).toBe(true);
    const m1 = Date.now();
    pastMs(m1);
    const s1 = dumpHash(db.path, { withoutAudit: true });
    expect(pages(db.path)).toBeLessThan(big / 2);
    // Grows again with other bytes on the pages it dropped, and past the snapshot's size.
    await rows(500, 'c');
    const m2 = Date.now();
    pastMs(m2);
    const s2 = dumpHash(db.path, { withoutAudit: true });
    await rows(700, 'd');
    const m3 = Date.now();
    pastMs(m3);
    const s3 = dumpHash(db.path, { withoutAudit: true });
    expect(pages(db.path)).toBeGreaterThan(big);
    // Shrinks again with a DELETE and an incremental trim of nothing (only a smaller moment below).
    const moments: [number, string][] = [
      [m1, s1],
      [m2, s2],
      [m3, s3],
    ];
    const source = localSource(dataDir, db.id);
    for (const [i, [at, want]] of moments.entries()) {
      const out = path.join(dataDir, `engine-${i}.sqlite`);
      buildRestore(planRestore(source, { at }), out);
      expect(dumpHash(out, { withoutAudit: true }), `engine at moment ${i}`).toBe(want);
      const fork = historyTarget(dataDir, `sg/fork${i}`);
      expect((await pool.run({ op: 'restoreInto', db: fork, source: db.id, from: db, at, by, timeoutMs: 60_000 })).ok).toBe(true);
      expect(dumpHash(fork.path, { withoutAudit: true }), `fork at moment ${i}`).toBe(want);
    }
    // In place, back and forth across the sizes.
    for (const [i, [at, want]] of [...moments.entries(), ...moments.entries()].reverse()) {
      expect((await pool.run({ op: 'restore', db, at, by, timeoutMs: 60_000 })).ok).toBe(true);
      expect(dumpHash(db.path, { withoutAudit: true }), `in place at moment ${i}`).toBe(want);
      pastMs(Date.now());
    }
    expect(listGenerations(source).length).toBeGreaterThan(1);
  }, 120_000);

  it('a VACUUM that shrinks below the snapshot inside the WAL, then rows on the pages it dropped', async () => {
    const db = historyTarget(dataDir, 'sg/vac');
    const write = (sql: string) => ok({ op: 'write', db, sql, params: [], callKey: nextKey() });
    const rows = (n: number, c: string) =>
      write(
        `INSERT INTO t(v) SELECT printf('%.1500c', '${c}') || i FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${n}) SELECT i FROM n)`,
      );
    await write('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    await rows(1000, 'a');
    await ok({ op: 'snapshot', db, reason: 'manual' });
    const big = pages(db.path);
    await write('DELETE FROM t WHERE id > 100');
    // agentdb refuses VACUUM; a program outside it that opens the file is not refused.
    const outside = () => {
      const o = new Database(db.path);
      o.exec('VACUUM');
      o.close();
    };
    outside();
    await write('INSERT INTO t(v) VALUES (1)');
    const m1 = Date.now();
    pastMs(m1);
    const s1 = dumpHash(db.path, { withoutAudit: true });
    expect(pages(db.path)).toBeLessThan(big / 2);
    await rows(400, 'c');
    const m2 = Date.now();
    pastMs(m2);
    const s2 = dumpHash(db.path, { withoutAudit: true });
    await write('DELETE FROM t WHERE id > 50');
    outside();
    await rows(30, 'e');
    const m3 = Date.now();
    pastMs(m3);
    const s3 = dumpHash(db.path, { withoutAudit: true });
    const source = localSource(dataDir, db.id);
    // One generation holds the shrink and the growth after it (its snapshot is the big state).
    expect(listGenerations(source).at(-1)!.snapshot!.pages).toBeGreaterThan(pages(db.path));
    for (const [i, [at, want]] of (
      [
        [m1, s1],
        [m2, s2],
        [m3, s3],
      ] as [number, string][]
    ).entries()) {
      const out = path.join(dataDir, `vac-${i}.sqlite`);
      buildRestore(planRestore(source, { at }), out);
      expect(dumpHash(out, { withoutAudit: true }), `engine at moment ${i}`).toBe(want);
      const fork = historyTarget(dataDir, `sg/vfork${i}`);
      expect((await pool.run({ op: 'restoreInto', db: fork, source: db.id, from: db, at, by, timeoutMs: 60_000 })).ok).toBe(true);
      expect(dumpHash(fork.path, { withoutAudit: true }), `fork at moment ${i}`).toBe(want);
    }
    for (const [i, [at, want]] of (
      [
        [m2, s2],
        [m1, s1],
        [m3, s3],
        [m2, s2],
      ] as [number, string][]
    ).entries()) {
      expect((await pool.run({ op: 'restore', db, at, by, timeoutMs: 60_000 })).ok).toBe(true);
      expect(dumpHash(db.path, { withoutAudit: true }), `in place #${i}`).toBe(want);
      pastMs(Date.now());
    }
  }, 120_000);
});
