import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { listGenerations, localSource } from '../../src/history/layout.ts';
import type { ExecutorPool } from '../../src/store/executor-pool.ts';
import type { DbTarget, ExecOutcome, ExecRequest } from '../../src/store/executor-protocol.ts';
import { HandleCache } from '../../src/store/handle-cache.ts';
import { HistoryCapture } from '../../src/store/history-capture.ts';
import { snapshotNow } from '../../src/store/history-restore.ts';
import { dumpHash, integrity, pastMs } from '../helpers/history.ts';
import { historyPool, historyTarget, mustRun } from '../helpers/history-pool.ts';

// A hostile review of restores in place that read across generations (`SnapshotMeta.follows`):
// a generation boundary marked `follows` must be exactly the state at the previous generation's
// last captured commit, or the one-commit restore leaves pages of the present behind, which
// neither the live-page check nor PRAGMA integrity_check can see.

let dataDir: string;
let pool: ExecutorPool;
const by = { who: 'operator:test', via: 'operator' as const };

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-follows-hostile-'));
  pool = await historyPool(dataDir, { handleCacheSize: 4, checkpointBytes: 64 * 1024 });
});
afterAll(async () => {
  await pool.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

let seq = 0;
const ok = (req: ExecRequest): Promise<any> => mustRun(pool, req);
const write = (db: DbTarget, sql: string, params: (string | number | null)[] = []) => ok({ op: 'write', db, sql, params, callKey: `k${++seq}` });
const restore = (db: DbTarget, args: { at?: number; undo?: string }): Promise<ExecOutcome> => pool.run({ op: 'restore', db, ...args, by, timeoutMs: 60_000 });

/** A manual snapshot taken in this process, as an executor child takes it (the pool has closed the database first). */
function snapshotHere(db: DbTarget): { snapshot?: string } {
  const history = new HistoryCapture(dataDir, { checkpointBytes: 64 * 1024, retentionDays: 30 });
  const handles = new HandleCache({ size: 4, ...history.hooks() });
  try {
    return snapshotNow(handles, history, dataDir, { op: 'snapshot', db, reason: 'manual' });
  } finally {
    handles.closeAll();
  }
}

describe('a snapshot marked follows', () => {
  it('a commit from another connection between the capture and the snapshot: a restore back across it equals the fork', async () => {
    const db = historyTarget(dataDir, 'fw/outside');
    await write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    await write(db, "INSERT INTO t(v) SELECT printf('%.500c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) SELECT i FROM n)");
    const at = Date.now();
    pastMs(at);
    const atState = dumpHash(db.path, { withoutAudit: true });
    await write(db, "UPDATE t SET v = 'later' WHERE id > 390");
    await ok({ op: 'close', path: db.path });

    // A program outside agentdb commits right after the snapshot's capture copied and
    // checkpointed everything (the moment snapshotNow looks at the WAL), before its snapshot.
    const real = fs.statSync;
    let fired = false;
    const spy = vi.spyOn(fs, 'statSync').mockImplementation(((p: fs.PathLike, o?: unknown) => {
      const st = real(p, o as fs.StatSyncOptions);
      if (!fired && p === `${db.path}-wal` && /snapshotNow/.test(new Error().stack?.split('\n').find((l) => l.includes('/src/')) ?? '')) {
        fired = true;
        const outside = new Database(db.path);
        try {
          outside.prepare("UPDATE t SET v = 'outside' WHERE id = 1").run();
        } finally {
          outside.close();
        }
      }
      return st;
    }) as typeof fs.statSync);
    try {
      expect(snapshotHere(db)).toMatchObject({ snapshot: expect.any(String) });
    } finally {
      spy.mockRestore();
    }
    expect(fired).toBe(true);
    const gens = listGenerations(localSource(dataDir, db.id));
    expect(gens).toHaveLength(2);
    // The snapshot holds the outside commit, which the first generation never captured: it
    // must not claim to continue it exactly (it did, and the restore below kept row 1 'outside').
    expect(gens[1]!.snapshot!.follows).toBeUndefined();

    await write(db, "UPDATE t SET v = 'today' WHERE id = 200");
    const fork = historyTarget(dataDir, 'fw/outsidefork');
    expect(codeOf(await pool.run({ op: 'restoreInto', db: fork, source: db.id, at, by, timeoutMs: 60_000 }))).toBe('ok');
    expect(dumpHash(fork.path, { withoutAudit: true })).toBe(atState);
    expect(codeOf(await restore(db, { at }))).toBe('ok');
    expect(integrity(db.path)).toBe('ok');
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(atState);
  }, 60_000);
});

function codeOf(out: ExecOutcome): string {
  return out.ok ? 'ok' : out.error.code;
}
