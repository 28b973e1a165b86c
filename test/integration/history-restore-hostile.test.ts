import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it, vi } from 'vitest';
import { historyDir, listUndoPoints } from '../../src/history/history-files.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { restoreInPlace, type RestoreStep } from '../../src/history/restore-requests.ts';
import { auditStatements, dumpHash, integrity, pastMs } from '../helpers/history.ts';
import { historyCalls, historyTarget, withHistoryPool } from '../helpers/history-pool.ts';

// A hostile review of the restore in place within the live generation (one WAL commit of the
// pages changed since): the page set under every kind of change, chained restores and undos,
// and what a crash or another connection in the middle leaves behind.

let dataDir: string;
let pool: ExecutorPool;
withHistoryPool('agentdb-restore-hostile-', { handleCacheSize: 4, checkpointBytes: 64 * 1024 }, (d, p) => {
  dataDir = d;
  pool = p;
});
const { by, ok, write, restore, rowsThenMoment, nextKey } = historyCalls(() => pool);

/** A small deterministic generator, so a failure repeats. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const OPS: ((r: () => number) => string)[] = [
  (r) => `INSERT INTO a(v, b) VALUES ('${'a'.repeat(Math.floor(r() * 400))}', randomblob(${Math.floor(r() * 9000)}))`,
  (r) =>
    `INSERT INTO a(v, b) SELECT printf('%.${Math.floor(r() * 300)}c', 'z'), randomblob(${Math.floor(r() * 600)}) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${1 + Math.floor(r() * 150)}) SELECT i FROM n)`,
  (r) => `UPDATE a SET v = v || 'u', b = randomblob(${Math.floor(r() * 7000)}) WHERE id % ${2 + Math.floor(r() * 7)} = 0`,
  (r) => `DELETE FROM a WHERE id % ${2 + Math.floor(r() * 5)} = ${Math.floor(r() * 2)}`,
  (r) => `INSERT OR REPLACE INTO w(k, v) VALUES ('k${Math.floor(r() * 300)}', randomblob(${Math.floor(r() * 3000)}))`,
  (r) => `DELETE FROM w WHERE k > 'k${Math.floor(r() * 300)}'`,
  (r) => `CREATE TABLE IF NOT EXISTS big${Math.floor(r() * 3)}(x BLOB)`,
  (r) =>
    `INSERT INTO big${Math.floor(r() * 3)}(x) SELECT randomblob(4000) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${1 + Math.floor(r() * 60)}) SELECT i FROM n)`,
  (r) => `DROP big${Math.floor(r() * 3)}`,
  (r) => `CREATE INDEX IF NOT EXISTS a_v${Math.floor(r() * 4)} ON a(v${r() < 0.5 ? ', id' : ''})`,
  (r) => `ALTER TABLE a ADD COLUMN c${Math.floor(r() * 1e9)} INT DEFAULT ${Math.floor(r() * 100)}`,
];

/** Tables `a` and `w` the OPS change, and `ballastRows` rows of 3,000 bytes in `ballast`. */
async function seedTables(db: DbTarget, ballastRows: number): Promise<void> {
  await write(db, 'CREATE TABLE a(id INTEGER PRIMARY KEY, v TEXT, b BLOB)');
  await write(db, 'CREATE TABLE w(k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID');
  await write(db, 'CREATE TABLE ballast(x BLOB)');
  await write(
    db,
    `INSERT INTO ballast(x) SELECT randomblob(3000) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ballastRows}) SELECT i FROM n)`,
  );
}

/** The moments marked, each with `dump`'s hash then; `mark` takes one now and lets the clock pass it. */
function momentsOf(dump: () => string): { moments: { at: number; hash: string }[]; mark: () => void } {
  const moments: { at: number; hash: string }[] = [];
  const mark = () => {
    const at = Date.now();
    pastMs(at);
    moments.push({ at, hash: dump() });
  };
  return { moments, mark };
}

/** A write, or `DROP name` as the drop tool does it. */
const change = (db: DbTarget, sql: string): Promise<ExecOutcome> =>
  sql.startsWith('DROP big')
    ? pool.run({ op: 'drop', db, table: sql.slice(5), callKey: nextKey() })
    : pool.run({ op: 'write', db, sql, params: [], callKey: nextKey() });

describe('restore in place within the generation, against every kind of change', () => {
  it('each moment, restored to in any order, chained with undos, equals its dump exactly', async () => {
    const db = historyTarget(dataDir, 'fz/main');
    const r = rng(11);
    // Ballast no write touches: what the writes change stays under half the pages, so most
    // restores go the way under review (one commit of the pages changed since).
    await seedTables(db, 2500);
    const { moments, mark } = momentsOf(() => dumpHash(db.path, { withoutAudit: true }));
    for (let i = 0; i < 80; i++) {
      const sql = OPS[Math.floor(r() * OPS.length)]!(r);
      const out = await change(db, sql);
      if (!out.ok && !['SQL_ERROR', 'NOT_FOUND'].includes(out.error.code)) throw new Error(`${sql}: ${out.error.code} ${out.error.detail}`);
      mark();
    }
    const undos: { id: string; hash: string }[] = [];
    for (let round = 0; round < 30; round++) {
      const choice = r();
      const before = dumpHash(db.path, { withoutAudit: true });
      if (choice < 0.25 && undos.length) {
        const u = undos.splice(Math.floor(r() * undos.length), 1)[0]!;
        const out = await restore(db, { undo: u.id });
        expect(out.ok, JSON.stringify(out)).toBe(true);
        expect(dumpHash(db.path, { withoutAudit: true }), `undo ${u.id}`).toBe(u.hash);
        undos.push({ id: (out as { result: { undoId: string } }).result.undoId, hash: before });
      } else if (choice < 0.45) {
        // More writes between the restores.
        for (let k = 0; k < 3; k++) {
          await change(db, OPS[Math.floor(r() * OPS.length)]!(r));
        }
      } else {
        // Mostly a moment of the live generation (the way under review), sometimes any.
        const { listGenerations, localSource } = await import('../../src/history/history-files.ts');
        const since = listGenerations(localSource(dataDir, db.id)).at(-1)!.snapshot!.at;
        const live = moments.filter((m) => m.at >= since);
        const pick = live.length && r() < 0.8 ? live : moments;
        const m = pick[Math.floor(r() * pick.length)]!;
        const out = await restore(db, { at: m.at });
        expect(out.ok, JSON.stringify(out)).toBe(true);
        expect(dumpHash(db.path, { withoutAudit: true }), `round ${round} to ${m.at}`).toBe(m.hash);
        undos.push({ id: (out as { result: { undoId: string } }).result.undoId, hash: before });
      }
      expect(integrity(db.path)).toBe('ok');
      mark();
    }
    const { listGenerations, localSource } = await import('../../src/history/history-files.ts');
    // The restores went the way under review: no generation began.
    expect(listGenerations(localSource(dataDir, db.id)).map((g) => g.snapshot?.reason)).toEqual(['first']);
    // Every moment, before and after the restores, is still there for a fork.
    for (const m of moments.filter((_, i) => i % 9 === 0)) {
      const fork = historyTarget(dataDir, `fz/fork${nextKey()}`);
      await ok({ op: 'restoreInto', db: fork, source: db.id, from: db, at: m.at, by, timeoutMs: 60_000 });
      expect(dumpHash(fork.path, { withoutAudit: true })).toBe(m.hash);
    }
  }, 240_000);
});

describe('restore in place within the generation, at the edges of time', () => {
  it("to a commit's own millisecond, to the snapshot moment, the same moment twice: equals a fork of that moment", async () => {
    const { listGenerations, listSegments, localSource } = await import('../../src/history/history-files.ts');
    const { readCommits } = await import('../../src/history/segment-index.ts');
    const db = historyTarget(dataDir, 'edge/main');
    const r = rng(7);
    await seedTables(db, 1500);
    await ok({ op: 'snapshot', db, reason: 'manual' });
    for (let i = 0; i < 25; i++) await change(db, OPS[Math.floor(r() * OPS.length)]!(r));
    const source = localSource(dataDir, db.id);
    const gen = listGenerations(source).at(-1)!;
    const times = [gen.snapshot!.at, ...listSegments(gen).flatMap((sg) => readCommits(sg.indexPath).map((c) => c.at))];
    const picks = [times[0]!, times[1]!, ...times.filter((_, i) => i % 4 === 2), times.at(-2)!];
    const expected = new Map<number, string>();
    for (const at of picks) {
      const fork = historyTarget(dataDir, `edge/fork${nextKey()}`);
      await ok({ op: 'restoreInto', db: fork, source: db.id, from: db, at, by, timeoutMs: 60_000 });
      expected.set(at, dumpHash(fork.path, { withoutAudit: true }));
    }
    for (const at of [...picks, ...picks.slice(0, 3).reverse()]) {
      const out = await restore(db, { at });
      expect(out.ok, JSON.stringify(out)).toBe(true);
      expect(dumpHash(db.path, { withoutAudit: true }), `at ${at} (${times.indexOf(at)})`).toBe(expected.get(at));
      expect(integrity(db.path)).toBe('ok');
      // And the same moment again at once: nothing to write, the same state.
      if (at === picks[2]) {
        expect((await restore(db, { at })).ok).toBe(true);
        expect(dumpHash(db.path, { withoutAudit: true })).toBe(expected.get(at));
      }
    }
    // All of them by one commit of the generation (none began another).
    expect(listGenerations(source).at(-1)!.name).toBe(gen.name);
  }, 240_000);
});

/**
 * Runs a restore in place in this process, as an executor child would (the pool has closed
 * the database first), with `at` called after each step.
 */
function restoreHere(db: DbTarget, at: number, onStep: (step: RestoreStep) => void, who = 'operator:crash') {
  const history = new HistoryCapture(dataDir, { checkpointBytes: 1024 * 1024, retentionDays: 30 });
  const handles = new HandleCache({ size: 4, ...history.hooks() });
  try {
    return restoreInPlace(handles, history, dataDir, { op: 'restore', db, at, by: { who, via: 'operator' } }, { step: onStep });
  } finally {
    handles.closeAll();
  }
}

class Crash extends Error {}

/** Restores `db` to `at` here, dying once the restore's frames are written (as a kill there would). */
function crashWhenWritten(db: DbTarget, at: number): void {
  expect(() =>
    restoreHere(db, at, (step) => {
      if (step === 'written') throw new Crash();
    }),
  ).toThrow(Crash);
}

async function setUp(id: string): Promise<{ db: DbTarget; at: number; atState: string; before: string }> {
  const db = historyTarget(dataDir, id);
  const at = await rowsThenMoment(db);
  const atState = dumpHash(db.path, { withoutAudit: true });
  for (let i = 0; i < 10; i++) await write(db, 'UPDATE t SET v = ? WHERE id % 13 = ?', [`b${i}`, i]);
  const before = dumpHash(db.path, { withoutAudit: true });
  await ok({ op: 'close', path: db.path });
  return { db, at, atState, before };
}

describe('what an interrupted restore within the generation leaves', () => {
  it('a WAL torn before its commit frame restores nothing, and no audit row says it did', async () => {
    const { db, at, before } = await setUp('hx/torn');
    // The restore dies while writing its commit: the frames before the last are on disk, the
    // commit frame is not (a kill between two of writeDeltaWal's batches leaves exactly this).
    crashWhenWritten(db, at);
    const wal = `${db.path}-wal`;
    const size = fs.statSync(wal).size;
    const frame = 24 + 4096;
    expect((size - 32) % frame).toBe(0);
    expect((size - 32) / frame).toBeGreaterThan(1);
    fs.truncateSync(wal, size - frame);
    // The database is as it was.
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(before);
    // A tenant reads it (capture runs on open), then another operator restores to the same moment.
    await ok({ op: 'query', db, sql: 'SELECT count(*) FROM t', params: [], maxRows: 1 });
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(before);
    const other = await pool.run({ op: 'restore', db, at, by: { who: 'operator:other', via: 'operator' }, timeoutMs: 60_000 });
    expect(other.ok, JSON.stringify(other)).toBe(true);
    // Only the second restore happened: one audit row for it, none for the torn one.
    const rows = auditStatements(db.path);
    expect(rows.filter((s) => s.includes('interrupted'))).toEqual([]);
    expect(rows).toHaveLength(1);
  }, 60_000);

  it('a connection from outside agentdb opening the database between the undo point and the commit', async () => {
    const { db, at, atState, before } = await setUp('hx/outside');
    let outside: Database.Database | undefined;
    let result: unknown;
    let error: unknown;
    try {
      result = restoreHere(db, at, (step) => {
        if (step === 'undo') {
          outside = new Database(db.path);
          outside.prepare('SELECT count(*) FROM t').get();
        }
      });
    } catch (err) {
      error = err;
    }
    outside?.close();
    // Restored through SQLite beside that connection, as docs/history.md promises for a program
    // outside agentdb having the file open (it was: a raw EEXIST and a pending undo point).
    expect(error).toBeUndefined();
    expect(result).toMatchObject({ undoId: expect.stringMatching(/^u/) });
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(atState);
    expect(before).not.toBe(atState);
    expect(auditStatements(db.path)).toHaveLength(1);
    expect(listUndoPoints(historyDir(dataDir, db.id)).map((p) => [p.id, p.pending])).toEqual([[(result as { undoId: string }).undoId, undefined]]);
  }, 60_000);
});

describe('a program outside agentdb opening the database while the restore writes its commit', () => {
  it('finds a WAL without its commit frame: the restore must not answer restored unless it is', async () => {
    const { db, at, atState, before } = await setUp('hx/midwrite');
    const wal = `${db.path}-wal`;
    let outside: Database.Database | undefined;
    const real = fs.writeSync;
    // Right after the WAL's header is written (before its frames), a program opens the
    // database and reads it: SQLite recovers the WAL as it finds it then.
    const spy = vi.spyOn(fs, 'writeSync').mockImplementation(((fd: number, ...rest: unknown[]) => {
      const n = (real as (...a: unknown[]) => number)(fd, ...rest);
      // (Wherever the restore writes its WAL: as the -wal itself, or beside it first.)
      const file = fs.readlinkSync(`/proc/self/fd/${fd}`);
      if (!outside && (file === wal || (file.startsWith(db.path) && file.endsWith('.wal.tmp')))) {
        outside = new Database(db.path);
        outside.prepare('SELECT count(*) FROM t').get();
      }
      return n;
    }) as typeof fs.writeSync);
    let result: unknown;
    let error: unknown;
    try {
      result = restoreHere(db, at, () => {}, 'operator:midwrite');
    } catch (err) {
      error = err;
    } finally {
      spy.mockRestore();
    }
    expect(outside).toBeDefined();
    const seen = dumpHash(db.path, { withoutAudit: true });
    outside!.close();
    const now = dumpHash(db.path, { withoutAudit: true });
    expect(integrity(db.path)).toBe('ok');
    const audited = auditStatements(db.path);
    if (result) {
      // It answered with an undo id: the database must be the restored one, for everyone.
      expect(now, 'answered restored, but the database is not').toBe(atState);
      expect(seen).toBe(atState);
      expect(audited).toHaveLength(1);
    } else {
      expect(now).toBe(before);
      expect(audited).toEqual([]);
      expect(listUndoPoints(historyDir(dataDir, db.id)).filter((p) => p.pending)).toEqual([]);
    }
    // A connection there before the commit is in place: it is copied in through SQLite instead.
    expect(error).toBeUndefined();
    expect(now).toBe(atState);
  }, 60_000);
});

describe('a restore asked again after it crashed with its commit in place', () => {
  const crashAfterCommit = (db: DbTarget, at: number): string => {
    crashWhenWritten(db, at);
    return listUndoPoints(historyDir(dataDir, db.id)).find((p) => p.pending)!.id;
  };
  // (Read through agentdb: a connection of this process would fold the WAL in behind capture's back.)
  const oldRows = async (db: DbTarget) => (await ok({ op: 'query', db, sql: 'SELECT count(*) FROM t WHERE v LIKE ?', params: ['b%'], maxRows: 1 })).rows[0][0];

  it('nothing written since: it is done, under the same undo id', async () => {
    const { db, at, atState, before } = await setUp('hx/retry-same');
    const pendingId = crashAfterCommit(db, at);
    expect(await oldRows(db)).toBe(0);
    await ok({ op: 'close', path: db.path });
    const again = restoreHere(db, at, () => {});
    expect(again.undoId).toBe(pendingId);
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(atState);
    expect(auditStatements(db.path)).toEqual([expect.stringMatching(/^restore to [^(]+$/)]);
    expect(listUndoPoints(historyDir(dataDir, db.id)).map((p) => [p.id, p.pending])).toEqual([[pendingId, undefined]]);
    await ok({ op: 'restore', db, undo: pendingId, by, timeoutMs: 60_000 });
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(before);
  }, 60_000);

  it('written to since: runs anew, under an undo id that leads back to those writes', async () => {
    const { db, at, atState, before } = await setUp('hx/retry');
    const pendingId = crashAfterCommit(db, at);
    // The database is the restored one from here: agents go on writing to it, acknowledged,
    // before the request is asked again (a BullMQ retry comes after the stalled-job check).
    expect(await oldRows(db)).toBe(0);
    await write(db, 'INSERT INTO t(v) VALUES (?)', ['written between the crash and the retry']);
    const withWrite = dumpHash(db.path, { withoutAudit: true });
    await ok({ op: 'close', path: db.path });
    // It was: restored again under the crashed attempt's undo id, which leads back to before
    // that attempt, its dry run saying it discards nothing: the write reachable by no undo.
    const again = restoreHere(db, at, () => {});
    expect(again.undoId).not.toBe(pendingId);
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(atState);
    expect(listUndoPoints(historyDir(dataDir, db.id)).filter((p) => p.pending)).toEqual([]);
    await ok({ op: 'restore', db, undo: again.undoId, by, timeoutMs: 60_000 });
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(withWrite);
    expect(auditStatements(db.path).filter((s) => s.endsWith('(interrupted before it answered)'))).toHaveLength(1);
    // And the crashed attempt's own undo id leads back to before it.
    const dry = await restore(db, { undo: pendingId, dryRun: true } as never);
    expect((dry as { result: { discardsCommits: number } }).result.discardsCommits).toBeGreaterThanOrEqual(1);
    await ok({ op: 'restore', db, undo: pendingId, by, timeoutMs: 60_000 });
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(before);
  }, 60_000);
});

describe('another restore after one crashed with its commit in place', () => {
  it("records the crashed one's audit row, in a database that had no audit table yet", async () => {
    const { db, at, atState } = await setUp('hx/other');
    crashWhenWritten(db, at);
    // A tenant's read opens it first (capture copies the restore's commit), through agentdb.
    expect((await ok({ op: 'query', db, sql: 'SELECT count(*) FROM t WHERE v LIKE ?', params: ['b%'], maxRows: 1 })).rows[0][0]).toBe(0);
    // Then another operator restores it (it was: "no such table: _agentdb_audit", for every
    // restore of this database from then on, the point pending for ever).
    const out = await pool.run({ op: 'restore', db, at, by: { who: 'operator:other', via: 'operator' }, timeoutMs: 60_000 });
    expect(out.ok, JSON.stringify(out)).toBe(true);
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(atState);
    expect(listUndoPoints(historyDir(dataDir, db.id)).filter((p) => p.pending)).toEqual([]);
    // Its own restore went back to before any audit row; its undo comes back to the state it
    // found, the crashed restore's row recorded.
    const undo = await ok({ op: 'restore', db, undo: (out as { result: { undoId: string } }).result.undoId, by, timeoutMs: 60_000 });
    expect(undo.undoId).toMatch(/^u/);
    expect(auditStatements(db.path).filter((r) => r.endsWith('(interrupted before it answered)'))).toHaveLength(1);
  }, 60_000);
});

describe('backups and disaster restore of a database restored within its generation', () => {
  it('every moment around the restores comes back from the blob store alone, and a prune keeps them', async () => {
    const { backupDatabase } = await import('../../src/history/backup.ts');
    const { restoreFromBlob } = await import('../../src/history/blob-restore.ts');
    const { FolderBlobStore } = await import('../../src/blobs/folder-blob-store.ts');
    const { pruneHistory } = await import('../../src/history/prune.ts');
    const db = historyTarget(dataDir, 'bk/main');
    const r = rng(3);
    await seedTables(db, 800);
    const { moments, mark } = momentsOf(() => dumpHash(db.path));
    for (let round = 0; round < 6; round++) {
      for (let i = 0; i < 5; i++) await change(db, OPS[Math.floor(r() * OPS.length)]!(r));
      mark();
      const out = await restore(db, { at: moments[Math.floor(r() * moments.length)]!.at });
      expect(out.ok, JSON.stringify(out)).toBe(true);
      mark();
      if (round === 2) {
        await ok({ op: 'restore', db, undo: (out as { result: { undoId: string } }).result.undoId, by, timeoutMs: 60_000 });
        mark();
      }
    }
    // The nightly run: a new generation closes the segments, then the backup.
    await ok({ op: 'snapshot', db, reason: 'nightly' });
    const store = new FolderBlobStore(path.join(dataDir, 'blobs'));
    await backupDatabase(store, dataDir, db.id);
    pruneHistory(dataDir, { now: Date.now(), retentionDays: 30 });
    for (const m of moments) {
      const file = path.join(dataDir, 'disaster', `${nextKey()}.sqlite`);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      await restoreFromBlob(store, { id: db.id, dbPath: file, workDir: path.dirname(file), at: m.at });
      expect(integrity(file)).toBe('ok');
      expect(dumpHash(file), `moment ${moments.indexOf(m)}`).toBe(m.hash);
    }
  }, 240_000);
});

describe('statements queued around a restore within the generation', () => {
  it('those before it are in its undo point, those after it on top of the restored state', async () => {
    const db = historyTarget(dataDir, 'q/main');
    const at = await rowsThenMoment(db);
    await write(db, 'INSERT INTO t(v) VALUES (?)', ['after the moment']);
    // Reads on the other child keep the database open there until the pool closes it.
    const w = (v: string) => pool.run({ op: 'write', db, sql: 'INSERT INTO t(v) VALUES (?)', params: [v], callKey: nextKey() });
    const q = () => pool.run({ op: 'query', db, sql: 'SELECT count(*) FROM t', params: [], maxRows: 1 });
    const outs = await Promise.all([w('b1'), q(), w('b2'), q(), restore(db, { at }), w('a1'), q(), w('a2'), q(), w('a3')]);
    expect(
      outs.every((o) => o.ok),
      JSON.stringify(outs.filter((o) => !o.ok)),
    ).toBe(true);
    const names = async (): Promise<string[]> =>
      (await ok({ op: 'query', db, sql: 'SELECT v FROM t WHERE length(v) < 20 ORDER BY id', params: [], maxRows: 100 })).rows.map((row: string[]) => row[0]);
    expect(await names()).toEqual(['a1', 'a2', 'a3']);
    await ok({ op: 'restore', db, undo: (outs[4] as { result: { undoId: string } }).result.undoId, by, timeoutMs: 60_000 });
    expect(await names()).toEqual(['after the moment', 'b1', 'b2']);
  }, 60_000);
});

describe('a file system without hard links', () => {
  it('restores the other way (a rebuilt file renamed over)', async () => {
    const { db, at, atState } = await setUp('hx/nolinks');
    const spy = vi.spyOn(fs, 'linkSync').mockImplementation(() => {
      throw Object.assign(new Error('EPERM: operation not permitted, link'), { code: 'EPERM' });
    });
    let result: { undoId?: string } | undefined;
    try {
      result = restoreHere(db, at, () => {}, 'operator:nolinks');
    } finally {
      spy.mockRestore();
    }
    expect(result?.undoId).toMatch(/^u/);
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(atState);
    expect(auditStatements(db.path)).toHaveLength(1);
    expect(fs.readdirSync(path.dirname(db.path)).filter((n) => n.includes('.restore-'))).toEqual([]);
  }, 60_000);
});
