import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it, vi } from 'vitest';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { snapshotNow } from '../../src/history/snapshot-now.ts';
import { dumpHash, integrity, pastMs } from '../helpers/history.ts';
import { historyCalls, historyTarget, withHistoryPool } from '../helpers/history-pool.ts';

// A hostile review of restores in place that read across generations (`SnapshotMeta.follows`):
// a generation boundary marked `follows` must be exactly the state at the previous generation's
// last captured commit, or the one-commit restore leaves pages of the present behind, which
// neither the live-page check nor PRAGMA integrity_check can see.

let dataDir: string;
let pool: ExecutorPool;
withHistoryPool('agentdb-follows-hostile-', { handleCacheSize: 4, checkpointBytes: 64 * 1024 }, (d, p) => {
  dataDir = d;
  pool = p;
});
const { by, ok, write, restore, rowsThenMoment } = historyCalls(() => pool);

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
    const at = await rowsThenMoment(db);
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
    expect(codeOf(await pool.run({ op: 'restoreInto', db: fork, source: db.id, from: db, at, by, timeoutMs: 60_000 }))).toBe('ok');
    expect(dumpHash(fork.path, { withoutAudit: true })).toBe(atState);
    expect(codeOf(await restore(db, { at }))).toBe('ok');
    expect(integrity(db.path)).toBe('ok');
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(atState);
  }, 60_000);
});

describe('capture checkpointing after it copied', () => {
  it('a commit from another connection between the copy and the RESTART checkpoint is history, or history starts over', async () => {
    const db = historyTarget(dataDir, 'fw/restart');
    await write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    await write(
      db,
      "INSERT INTO t(v) SELECT printf('%.500c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) SELECT i FROM n)",
    );
    await ok({ op: 'close', path: db.path });

    // This process writes as an executor child does, capture checkpointing after every commit;
    // a program outside agentdb commits after the copy (under the write lock) and before the
    // checkpoint (outside it), which folds that commit into the file.
    const history = new HistoryCapture(dataDir, { checkpointBytes: 1, retentionDays: 30 });
    const handles = new HandleCache({ size: 4, ...history.hooks() });
    const real = Database.prototype.pragma;
    let fired = false;
    const spy = vi.spyOn(Database.prototype, 'pragma').mockImplementation(function (this: Database.Database, src: string, o?: Database.PragmaOptions) {
      if (!fired && src === 'wal_checkpoint(RESTART)') {
        fired = true;
        const outside = new Database(db.path);
        try {
          outside.prepare("UPDATE t SET v = 'outside' WHERE id = 90").run();
        } finally {
          outside.close();
        }
      }
      return real.call(this, src, o);
    });
    try {
      const live = handles.open(db, 'write');
      live.prepare("UPDATE t SET v = 'mine' WHERE id = 2").run();
      history.run(live, db);
      // The next commit starts the WAL over (salt-1 + 1), writing over the outside commit's frames.
      live.prepare("UPDATE t SET v = 'mine again' WHERE id = 4").run();
      history.run(live, db);
    } finally {
      spy.mockRestore();
      handles.closeAll();
    }
    expect(fired).toBe(true);
    // The generation the commit slipped past ends there; the next begins from the file.
    expect(listGenerations(localSource(dataDir, db.id)).map((g) => g.snapshot?.reason)).toEqual(['first', 'gap']);
    await write(db, "UPDATE t SET v = 'after' WHERE id = 3");

    // History up to now is the live file, the outside commit included.
    const at = Date.now();
    pastMs(at);
    const file = path.join(dataDir, 'restart-check.sqlite');
    buildRestore(planRestore(localSource(dataDir, db.id), { at }), file);
    expect(integrity(file)).toBe('ok');
    expect(dumpHash(file)).toBe(dumpHash(db.path));
  }, 60_000);
});

function codeOf(out: ExecOutcome): string {
  return out.ok ? 'ok' : out.error.code;
}
