import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { historyDir, listGenerations, listSegments, localSource } from '../../src/history/history-files.ts';
import { readCommits } from '../../src/history/segment-index.ts';
import { backupDatabase } from '../../src/history/backup.ts';
import { restoreFromBlob } from '../../src/history/blob-restore.ts';
import { FolderBlobStore } from '../../src/blobs/folder-blob-store.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { sha256File } from '../../src/history/snapshot.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome, ExecRequest } from '../../src/executor/executor-protocol.ts';
import { auditStatements, dumpHash, integrity, pastMs } from '../helpers/history.ts';
import { historyPool, historyTarget, mustRun } from '../helpers/history-pool.ts';

let dataDir: string;
let pool: ExecutorPool;
const by = { who: 'operator:test', via: 'operator' as const };

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-history-'));
  pool = await historyPool(dataDir, { handleCacheSize: 4, checkpointBytes: 32 * 1024 });
});
afterAll(async () => {
  await pool.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const target = (id: string): DbTarget => historyTarget(dataDir, id);
let seq = 0;
const ok = (req: ExecRequest): Promise<any> => mustRun(pool, req);
const write = (db: DbTarget, sql: string, params: (string | number | null)[] = []) => ok({ op: 'write', db, sql, params, callKey: `k${++seq}` });
const count = async (db: DbTarget, table = 't') => (await ok({ op: 'query', db, sql: `SELECT count(*) FROM ${table}`, params: [], maxRows: 1 })).rows[0][0];
const restore = (db: DbTarget, args: { at?: number; undo?: string; dryRun?: boolean }): Promise<ExecOutcome> =>
  pool.run({ op: 'restore', db, ...args, by, timeoutMs: 60_000 });
const codeOf = (o: ExecOutcome) => (o.ok ? 'ok' : o.error.code);

/** Writes `n` rows to `db`, answering the moment after each (with the clock past it). */
async function rows(db: DbTarget, n: number, tag = 'r'): Promise<number[]> {
  const moments: number[] = [];
  for (let i = 0; i < n; i++) {
    await write(db, 'INSERT INTO t(v, at) VALUES (?, random())', [`${tag}${i}-${'x'.repeat(300)}`]);
    const at = Date.now();
    pastMs(at);
    moments.push(at);
  }
  return moments;
}

describe('history capture', () => {
  it('copies every commit into segments whose checksums chain, and checkpoints only after copying', async () => {
    const db = target('cap/a');
    await write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at)');
    await rows(db, 200);
    const gens = listGenerations(localSource(dataDir, 'cap/a'));
    expect(gens).toHaveLength(1);
    const segs = listSegments(gens[0]!);
    // 200 rows of 300+ bytes pass 32 KiB of WAL many times over: several checkpoints, one segment each.
    expect(segs.length).toBeGreaterThan(3);
    expect(segs.slice(0, -1).every((s) => s.closed)).toBe(true);
    expect(segs.at(-1)!.closed).toBe(false);
    const commits = segs.flatMap((s) => readCommits(s.indexPath));
    // The first snapshot is of the empty file; the first write is two commits (agentdb's calls
    // table, then the CREATE); every INSERT is one.
    expect(commits.length).toBe(202);
    // The live WAL never grows far past the checkpoint size: copying came first, then the checkpoint.
    expect(fs.statSync(`${db.path}-wal`).size).toBeLessThan(64 * 1024);
  });

  it('copies what a crash left in the WAL when the database is next opened', async () => {
    const db = target('cap/crash');
    await write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at)');
    await rows(db, 3);
    // Evict every child's handle, then commit behind capture's back, as a child killed between
    // its commit and its copy would have: frames in the WAL that no segment holds.
    await pool.run({ op: 'evict', shards: [0] });
    const outside = new Database(db.path);
    outside.pragma('wal_autocheckpoint = 0');
    outside.prepare('INSERT INTO t(v) VALUES (?)').run('committed, not copied');
    const before = dumpHash(db.path, { withoutAudit: true });
    // Opening it (a read) copies the frames, stamped with the time they were found; the outside
    // connection stays open so nothing checkpoints.
    expect(await count(db)).toBe(4);
    const at = Date.now();
    pastMs(at);
    outside.close();
    await rows(db, 2, 'after');
    const out = await pool.run({ op: 'restoreInto', db: target('cap/crash-fork'), source: 'cap/crash', from: target('cap/crash'), at, by, timeoutMs: 60_000 });
    expect(codeOf(out)).toBe('ok');
    // (The fork's own audit records that it was made.)
    expect(dumpHash(target('cap/crash-fork').path, { withoutAudit: true })).toBe(before);
  });
});

describe('restore', () => {
  let db: DbTarget;
  let moments: number[];
  let hashes: string[];

  beforeAll(async () => {
    db = target('rs/main');
    await write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at)');
    moments = [];
    hashes = [];
    for (let i = 0; i < 6; i++) {
      moments.push(...(await rows(db, 20, `b${i}`)));
      hashes.push(dumpHash(db.path, { withoutAudit: true }));
      if (i === 2) await write(db, 'DELETE FROM t WHERE id % 3 = 0');
      if (i === 3) await write(db, 'CREATE TABLE u(k TEXT PRIMARY KEY, n INT) WITHOUT ROWID');
    }
  });

  it('--dry-run names the snapshot and counts frames and commits, changing nothing', async () => {
    const before = dumpHash(db.path);
    const out = await restore(db, { at: moments[59]!, dryRun: true });
    expect(out).toMatchObject({ ok: true, result: { database: 'rs/main', dryRun: true, snapshot: { id: 'g0000000001' } } });
    const r = (out as { result: { frames: number; commits: number } }).result;
    // The first write is two commits (agentdb's calls table, then the CREATE), then 60 INSERTs.
    expect(r.commits).toBe(62);
    expect(r.frames).toBeGreaterThanOrEqual(60);
    expect(dumpHash(db.path)).toBe(before);
  });

  it('restores in place to a moment, keeps an undo point, and the undo goes back exactly', async () => {
    // Every table exactly; the audit keeps the record of the restore and of its undo.
    const before = dumpHash(db.path, { withoutAudit: true });
    const out = await restore(db, { at: moments[39]! });
    expect(codeOf(out)).toBe('ok');
    const r = (out as { result: { undoId: string; restoredTo: string } }).result;
    expect(r.undoId).toMatch(/^u/);
    expect(await count(db)).toBe(40);
    // Statements keep working on the restored schema (no table u yet at that moment).
    expect(codeOf(await pool.run({ op: 'query', db, sql: 'SELECT * FROM u', params: [], maxRows: 1 }))).toBe('SQL_ERROR');
    await write(db, 'INSERT INTO t(v) VALUES (?)', ['after the restore']);
    await write(db, 'INSERT INTO t(v) VALUES (?)', ['also after the restore']);
    await write(db, 'DELETE FROM t WHERE v = ?', ['also after the restore']);
    const restoredState = dumpHash(db.path, { withoutAudit: true });
    // The undo discards the 3 commits acknowledged after the restore: its dry run says so first.
    const dry = await restore(db, { undo: r.undoId, dryRun: true });
    expect(dry).toMatchObject({ ok: true, result: { dryRun: true, discardsCommits: 3 } });
    const undo = await restore(db, { undo: r.undoId });
    expect(undo).toMatchObject({ ok: true, result: { discardsCommits: 3 } });
    // Back to the state before the restore, exactly (the audit row of the restore went with it;
    // the undo's row names it).
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(before);
    expect(integrity(db.path)).toBe('ok');
    expect(auditStatements(db.path).filter((s) => s.startsWith(`undo ${r.undoId} of the restore to ${new Date(r.restoredTo).toISOString()} `))).toHaveLength(1);
    // The undo is undoable too: back to the restored state, with the write made after it.
    const redo = await restore(db, { undo: (undo as { result: { undoId: string } }).result.undoId });
    expect(codeOf(redo)).toBe('ok');
    expect(await count(db)).toBe(41);
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(restoredState);
    // And back again, for the tests below, which expect the full history's last state.
    const again = await restore(db, { undo: (redo as { result: { undoId: string } }).result.undoId });
    expect(codeOf(again)).toBe('ok');
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(before);
  });

  it("records each restore in the database's own audit table", async () => {
    const file = new Database(db.path, { fileMustExist: true });
    try {
      const rowsOf = file.prepare("SELECT tool, decision, requester, statement FROM _agentdb_audit WHERE tool = 'RESTORE'").all() as { statement: string }[];
      expect(rowsOf.length).toBeGreaterThan(0);
      expect(rowsOf[0]).toMatchObject({ tool: 'RESTORE', decision: 'restored', requester: 'operator:test' });
    } finally {
      file.close();
    }
  });

  it('history after a restore continues: every earlier moment stays restorable', async () => {
    // The end of each batch of rows written before the restores: its dump was taken then.
    for (let batch = 0; batch < 6; batch++) {
      const fork = target(`rs/fork${batch * 20 + 19}`);
      const out = await pool.run({
        op: 'restoreInto',
        db: fork,
        source: 'rs/main',
        from: target('rs/main'),
        at: moments[batch * 20 + 19]!,
        by,
        timeoutMs: 60_000,
      });
      expect(codeOf(out)).toBe('ok');
      expect(integrity(fork.path)).toBe('ok');
      expect(dumpHash(fork.path, { withoutAudit: true })).toBe(hashes[batch]);
    }
    // A fork at the end of each batch holds exactly that batch's state (audit aside: forks have their own).
    const fork = target('rs/fork119');
    const f = new Database(fork.path);
    expect(f.prepare('SELECT count(*) FROM t').pluck().get() as number).toBe(120 - 20);
    f.close();
    // The restores above went back within the live generation: each a commit of it, none began another.
    expect(listGenerations(localSource(dataDir, 'rs/main'))).toHaveLength(1);
  });

  it('a restore in place back over most of the file begins a generation from the file it copied in: the old one ends at the undo point', async () => {
    const gdb = target('rs/gen');
    await write(gdb, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at)');
    const m = await rows(gdb, 10);
    await rows(gdb, 5, 'later');
    await write(
      gdb,
      "INSERT INTO t(v) SELECT printf('%.1000c', 'z') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) SELECT i FROM n)",
    );
    expect(await ok({ op: 'snapshot', db: gdb, reason: 'manual' })).toMatchObject({ snapshot: expect.any(String) });
    const source = localSource(dataDir, 'rs/gen');
    const oldGen = listGenerations(source).at(-1)!;
    const oldCommits = () => listSegments(oldGen).reduce((n, seg) => n + readCommits(seg.indexPath).length, 0);
    const commitsBefore = oldCommits();
    const out = await restore(gdb, { at: m[4]! });
    expect(codeOf(out)).toBe('ok');
    // The restore's own commit (every page of the database) went into no segment of the old generation.
    expect(oldCommits()).toBe(commitsBefore);
    expect(fs.readdirSync(oldGen.dir)).not.toContain('restoring.json');
    const gen = listGenerations(source).at(-1)!;
    expect(gen.name).not.toBe(oldGen.name);
    expect(gen.snapshot!.reason).toBe('restore');
    expect(sha256File(gen.snapshotPath)).toBe(gen.snapshot!.sha256);
    expect(fs.statSync(gen.snapshotPath).size).toBe(gen.snapshot!.bytes);
    // Nothing copied again: the snapshot is the one the restore started from, linked, and the
    // generation begins with one commit of what the restore wrote on top of it.
    const from = listGenerations(source).find((g) => g.name !== gen.name && fs.statSync(g.snapshotPath).ino === fs.statSync(gen.snapshotPath).ino);
    expect(from).toBeDefined();
    expect(gen.snapshot!.sha256).toBe(from!.snapshot!.sha256);
    // `began`: the restore's activity row's time, before the generation was published.
    expect(gen.snapshot!.base).toEqual({ segment: '00000001', frames: expect.any(Number), began: expect.any(Number) });
    expect(gen.snapshot!.base!.began).toBeLessThanOrEqual(gen.snapshot!.at);
    // The generation's first moment is the restored state, audit row included, and history goes on from it.
    const start = path.join(dataDir, 'gen-start.sqlite');
    buildRestore(planRestore(source, { at: gen.snapshot!.at }), start);
    const snap = new Database(start, { readonly: true, fileMustExist: true });
    try {
      expect(snap.prepare('SELECT count(*) FROM t').pluck().get()).toBe(5);
      expect(snap.prepare("SELECT count(*) FROM _agentdb_audit WHERE tool = 'RESTORE'").pluck().get()).toBe(1);
    } finally {
      snap.close();
    }
    expect(dumpHash(start)).toBe(dumpHash(gdb.path));
    fs.rmSync(start);
    const after = await rows(gdb, 3, 'after');
    const live = dumpHash(gdb.path);
    const fork = target('rs/genfork');
    expect(codeOf(await pool.run({ op: 'restoreInto', db: fork, source: 'rs/gen', from: target('rs/gen'), at: after[2]!, by, timeoutMs: 60_000 }))).toBe('ok');
    expect(dumpHash(fork.path, { withoutAudit: true })).toBe(dumpHash(gdb.path, { withoutAudit: true }));
    expect(live).toBe(dumpHash(gdb.path));
    // And the undo goes back to the moment before, from the old generation, discarding the
    // three commits since (the generation's base is the restore itself, not one of them).
    const undoId = (out as { result: { undoId: string } }).result.undoId;
    expect(await restore(gdb, { undo: undoId, dryRun: true })).toMatchObject({ ok: true, result: { discardsCommits: 3 } });
    const undo = await restore(gdb, { undo: undoId });
    expect(codeOf(undo)).toBe('ok');
    expect(await count(gdb)).toBe(15 + 400);
    expect(integrity(gdb.path)).toBe('ok');
  });

  it('a generation a restore began (linked snapshot, base commit) backs up whole with no write after it, and restores from the blob store alone', async () => {
    const ldb = target('rs/linkedblob');
    await write(ldb, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at)');
    const m = await rows(ldb, 10);
    await write(
      ldb,
      "INSERT INTO t(v) SELECT printf('%.1000c', 'q') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) SELECT i FROM n)",
    );
    await ok({ op: 'snapshot', db: ldb, reason: 'manual' });
    expect(codeOf(await restore(ldb, { at: m[4]! }))).toBe('ok');
    expect(listGenerations(localSource(dataDir, 'rs/linkedblob')).at(-1)!.snapshot!.base).toBeDefined();
    // Nothing was written since the restore: the nightly snapshot has nothing to take.
    expect(await ok({ op: 'snapshot', db: ldb, reason: 'nightly' })).toEqual({});
    const blobs = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-linked-blob-'));
    const store = new FolderBlobStore(blobs);
    try {
      // Straight after the restore: the generation is the current one and nothing was written since.
      await backupDatabase(store, dataDir, 'rs/linkedblob');
      const file = path.join(blobs, 'restored.sqlite');
      await restoreFromBlob(store, { id: 'rs/linkedblob', dbPath: file, workDir: blobs, at: Date.now() });
      expect(dumpHash(file)).toBe(dumpHash(ldb.path));
      expect(await count(ldb)).toBe(5);
    } finally {
      await store.close();
      fs.rmSync(blobs, { recursive: true, force: true });
    }
  });

  it('a restore in place within the live generation writes one commit of the pages changed since, and history goes on in the same generation', async () => {
    const ddb = target('rs/delta');
    await write(ddb, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at)');
    await write(
      ddb,
      "INSERT INTO t(v) SELECT printf('%.300c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) SELECT i FROM n)",
    );
    const m = await rows(ddb, 5);
    const atState = dumpHash(ddb.path, { withoutAudit: true });
    await write(ddb, 'UPDATE t SET v = ? WHERE id % 97 = 0', ['changed']);
    await rows(ddb, 3, 'later');
    const before = dumpHash(ddb.path, { withoutAudit: true });
    const source = localSource(dataDir, 'rs/delta');
    const gens = listGenerations(source).map((g) => g.name);
    const frames = () =>
      listGenerations(source)
        .flatMap((g) => listSegments(g))
        .reduce((n, seg) => n + (readCommits(seg.indexPath).at(-1)?.frames ?? 0), 0);
    const framesBefore = frames();
    const out = await restore(ddb, { at: m[4]! });
    expect(codeOf(out)).toBe('ok');
    expect(dumpHash(ddb.path, { withoutAudit: true })).toBe(atState);
    expect(integrity(ddb.path)).toBe('ok');
    // No new generation, and the restore's commit in it holds a few pages, not the database (200+).
    expect(listGenerations(source).map((g) => g.name)).toEqual(gens);
    expect(frames() - framesBefore).toBeLessThan(60);
    expect(fs.readdirSync(historyDir(dataDir, 'rs/delta')).filter((n) => n.startsWith('restore-'))).toEqual([]);
    // History holds the restore as a commit: a moment after it restores the restored state.
    const after = (await rows(ddb, 1, 'after'))[0]!;
    const fork = target('rs/deltafork');
    expect(codeOf(await pool.run({ op: 'restoreInto', db: fork, source: 'rs/delta', from: target('rs/delta'), at: after, by, timeoutMs: 60_000 }))).toBe('ok');
    expect(dumpHash(fork.path, { withoutAudit: true })).toBe(dumpHash(ddb.path, { withoutAudit: true }));
    // The undo says it discards the one commit made after the restore (not the restore's own), and goes back exactly.
    const undoId = (out as { result: { undoId: string } }).result.undoId;
    expect(await restore(ddb, { undo: undoId, dryRun: true })).toMatchObject({ ok: true, result: { discardsCommits: 1 } });
    expect(codeOf(await restore(ddb, { undo: undoId }))).toBe('ok');
    expect(dumpHash(ddb.path, { withoutAudit: true })).toBe(before);
  });

  it('a restore in place back across nightly snapshots is one commit too, when each snapshot follows the generation before exactly', async () => {
    const xdb = target('rs/across');
    await write(xdb, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at)');
    await write(
      xdb,
      "INSERT INTO t(v) SELECT printf('%.300c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) SELECT i FROM n)",
    );
    const at = (await rows(xdb, 3))[2]!;
    const atState = dumpHash(xdb.path, { withoutAudit: true });
    for (const tag of ['night1', 'night2']) {
      await rows(xdb, 3, tag);
      await write(xdb, 'DELETE FROM t WHERE id % 211 = 0');
      expect(await ok({ op: 'snapshot', db: xdb, reason: 'nightly' })).toMatchObject({ snapshot: expect.any(String) });
    }
    await rows(xdb, 2, 'today');
    const before = dumpHash(xdb.path, { withoutAudit: true });
    const source = localSource(dataDir, 'rs/across');
    const gens = listGenerations(source);
    expect(gens).toHaveLength(3);
    expect(gens[1]!.snapshot!.follows?.generation).toBe(gens[0]!.name);
    expect(gens[2]!.snapshot!.follows?.generation).toBe(gens[1]!.name);
    const out = await restore(xdb, { at });
    expect(codeOf(out)).toBe('ok');
    expect(dumpHash(xdb.path, { withoutAudit: true })).toBe(atState);
    expect(integrity(xdb.path)).toBe('ok');
    expect(listGenerations(source).map((g) => g.name)).toEqual(gens.map((g) => g.name));
    // Every moment of each generation still restores exactly, the restore's own included.
    const after = (await rows(xdb, 1, 'after'))[0]!;
    const fork = target('rs/acrossfork');
    expect(codeOf(await pool.run({ op: 'restoreInto', db: fork, source: 'rs/across', from: target('rs/across'), at: after, by, timeoutMs: 60_000 }))).toBe(
      'ok',
    );
    expect(dumpHash(fork.path, { withoutAudit: true })).toBe(dumpHash(xdb.path, { withoutAudit: true }));
    expect(codeOf(await restore(xdb, { undo: (out as { result: { undoId: string } }).result.undoId }))).toBe('ok');
    expect(dumpHash(xdb.path, { withoutAudit: true })).toBe(before);
    expect(integrity(xdb.path)).toBe('ok');
  });

  it('a restore within the generation makes the file shorter or longer again as it was', async () => {
    const sdb = target('rs/sizes');
    await write(sdb, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at)');
    await write(
      sdb,
      "INSERT INTO t(v) SELECT printf('%.300c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) SELECT i FROM n)",
    );
    const small = (await rows(sdb, 1))[0]!;
    const smallState = dumpHash(sdb.path, { withoutAudit: true });
    const smallSize = fs.statSync(sdb.path).size;
    await write(
      sdb,
      "INSERT INTO t(v) SELECT printf('%.1000c', 'y') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) SELECT i FROM n)",
    );
    const big = (await rows(sdb, 1, 'big'))[0]!;
    const bigState = dumpHash(sdb.path, { withoutAudit: true });
    const gens = listGenerations(localSource(dataDir, 'rs/sizes')).length;
    // Back before the big insert (the file cut to its size then), forward to after it (the pages
    // past that end written again), and back.
    for (const [at, state] of [
      [small, smallState],
      [big, bigState],
      [small, smallState],
    ] as const) {
      expect(codeOf(await restore(sdb, { at }))).toBe('ok');
      expect(dumpHash(sdb.path, { withoutAudit: true })).toBe(state);
      expect(integrity(sdb.path)).toBe('ok');
    }
    await ok({ op: 'close', path: sdb.path });
    expect(fs.statSync(sdb.path).size).toBeLessThan(smallSize + 8 * 4096);
    expect(listGenerations(localSource(dataDir, 'rs/sizes'))).toHaveLength(gens);
  });

  // Behind history's back, after the pool closed the database: rows get other bytes, and the
  // file's times are put back, so its size, inode and modification time are as sealed. Whatever
  // pages the write touched — one changed since the moment, one not, one past the size the restore
  // goes back to (which it cuts off) — the change time gives it away as the database opens: a gap
  // (a generation from the file as found), so moments before it restore without the outside
  // bytes and moments after it with them.
  for (const [name, rows_] of [
    ['a row changed after the moment', ['t', 500]],
    ['a row unchanged since the moment', ['t', 700]],
    ['a row unchanged since the moment and one past the size then', ['t', 700, 'u', 290]],
  ] as const) {
    it(`a restore within the generation finds the live file is not what history says, even with its time put back: ${name}`, async () => {
      const odb = target(`rs/tampered-${name.length}`);
      await write(odb, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at)');
      await write(odb, 'CREATE TABLE u(id INTEGER PRIMARY KEY, v TEXT)');
      await write(
        odb,
        "INSERT INTO t(v) SELECT printf('%.300c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) SELECT i FROM n)",
      );
      const at = (await rows(odb, 1))[0]!;
      const atState = dumpHash(odb.path, { withoutAudit: true });
      await write(odb, 'UPDATE t SET v = ? WHERE id = 500', ['changed after the moment']);
      // The file grows past its size at the moment.
      await write(
        odb,
        "INSERT INTO u(v) SELECT printf('%.300c', 'y') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) SELECT i FROM n)",
      );
      await ok({ op: 'close', path: odb.path });
      const st = fs.statSync(odb.path);
      const outside = new Database(odb.path);
      outside.pragma('wal_autocheckpoint = 0');
      for (let i = 0; i < rows_.length; i += 2)
        outside.prepare(`UPDATE ${rows_[i]} SET v = ? WHERE id = ?`).run('changed outside'.padEnd(300, '!'), rows_[i + 1]);
      outside.close();
      fs.utimesSync(odb.path, st.atime, st.mtime);
      expect(fs.statSync(odb.path)).toMatchObject({ size: st.size, mtimeMs: st.mtimeMs, ino: st.ino });
      const gens = listGenerations(localSource(dataDir, odb.id)).length;
      // Written on after it, over pages the outside write may have freed or moved.
      await write(odb, 'DELETE FROM t WHERE id % 7 = 0');
      const later = (await rows(odb, 3, 'after'))[2]!;
      const laterState = dumpHash(odb.path, { withoutAudit: true });
      expect(codeOf(await restore(odb, { at }))).toBe('ok');
      expect(dumpHash(odb.path, { withoutAudit: true })).toBe(atState);
      expect(integrity(odb.path)).toBe('ok');
      const after = listGenerations(localSource(dataDir, odb.id));
      expect(after.length).toBe(gens + 2);
      expect(after.at(-2)!.snapshot!.reason).toBe('gap');
      expect(codeOf(await restore(odb, { at: later }))).toBe('ok');
      expect(dumpHash(odb.path, { withoutAudit: true })).toBe(laterState);
      expect(integrity(odb.path)).toBe('ok');
    });
  }

  it('a file whose change time alone moved (chmod, a link made and removed) begins a gap generation as it opens: nothing short of reading it tells that from a write', async () => {
    const cdb = target('rs/chmod');
    await write(cdb, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at)');
    const at = (await rows(cdb, 3))[2]!;
    const atState = dumpHash(cdb.path, { withoutAudit: true });
    await rows(cdb, 2, 'later');
    await ok({ op: 'close', path: cdb.path });
    // What a container's `chown -R` at start or a hard-link backup does to the file.
    fs.chmodSync(cdb.path, fs.statSync(cdb.path).mode);
    fs.linkSync(cdb.path, `${cdb.path}.bak`);
    fs.rmSync(`${cdb.path}.bak`);
    const gens = listGenerations(localSource(dataDir, cdb.id)).length;
    const later = (await rows(cdb, 1, 'after'))[0]!;
    const laterState = dumpHash(cdb.path, { withoutAudit: true });
    const after = listGenerations(localSource(dataDir, cdb.id));
    expect(after.length).toBe(gens + 1);
    expect(after.at(-1)!.snapshot!.reason).toBe('gap');
    expect(codeOf(await restore(cdb, { at }))).toBe('ok');
    expect(dumpHash(cdb.path, { withoutAudit: true })).toBe(atState);
    expect(codeOf(await restore(cdb, { at: later }))).toBe('ok');
    expect(dumpHash(cdb.path, { withoutAudit: true })).toBe(laterState);
  });

  it("a generation a crashed process left half made is removed when the next one begins; a living process's is left alone", async () => {
    const cdb = target('rs/leftover');
    await write(cdb, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at)');
    await rows(cdb, 2);
    const gdir = localSource(dataDir, 'rs/leftover').generationsDir;
    // A pid that is no process (above the kernel's pid_max), and this test's own (alive).
    const dead = path.join(gdir, 'g0000000002.4194305.tmp');
    const living = path.join(gdir, `g0000000002.${process.pid}.tmp`);
    for (const dir of [dead, living]) {
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'snapshot.sqlite'), 'half');
    }
    expect(await ok({ op: 'snapshot', db: cdb, reason: 'manual' })).toMatchObject({ snapshot: 'g0000000002' });
    expect(fs.existsSync(dead)).toBe(false);
    expect(fs.existsSync(living)).toBe(true);
    fs.rmSync(living, { recursive: true });
  });

  describe('bad input leaves the database exactly as it was', () => {
    it('a time in the future, or before the window', async () => {
      const before = dumpHash(db.path);
      const future = await restore(db, { at: Date.now() + 60_000 });
      expect(future).toMatchObject({ ok: false, error: { code: 'HISTORY_OUT_OF_RANGE' } });
      expect((future as { error: { detail: string } }).error.detail).toMatch(/future/);
      const old = await restore(db, { at: Date.now() - 31 * 24 * 3600 * 1000 });
      expect(old).toMatchObject({ ok: false, error: { code: 'HISTORY_OUT_OF_RANGE' } });
      const early = await restore(db, { at: moments[0]! - 60_000 });
      expect(early).toMatchObject({ ok: false, error: { code: 'HISTORY_OUT_OF_RANGE' } });
      expect((early as { error: { detail: string } }).error.detail).toMatch(/before the history's earliest/);
      expect(dumpHash(db.path)).toBe(before);
    });

    it('an unknown database', async () => {
      expect(await restore(target('rs/nobody'), { at: Date.now() - 1000 })).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
      expect(fs.existsSync(target('rs/nobody').path)).toBe(false);
    });

    it("another database's undo id", async () => {
      const other = target('rs/other');
      await write(other, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at)');
      const m = await rows(other, 3);
      const out = await restore(other, { at: m[0]! });
      const undoId = (out as { result: { undoId: string } }).result.undoId;
      const before = dumpHash(db.path);
      expect(await restore(db, { undo: undoId })).toMatchObject({ ok: false, error: { code: 'UNDO_NOT_FOUND' } });
      expect(await restore(db, { undo: '../../etc/passwd' })).toMatchObject({ ok: false, error: { code: 'UNDO_NOT_FOUND' } });
      expect(dumpHash(db.path)).toBe(before);
    });

    it('a restore into an existing database', async () => {
      const before = dumpHash(target('rs/other').path);
      const out = await pool.run({
        op: 'restoreInto',
        db: target('rs/other'),
        source: 'rs/main',
        from: target('rs/main'),
        at: moments[5]!,
        by,
        timeoutMs: 60_000,
      });
      expect(out).toMatchObject({ ok: false, error: { code: 'DATABASE_EXISTS' } });
      expect(dumpHash(target('rs/other').path)).toBe(before);
    });

    it('a restore while another restore of the same database runs', async () => {
      // A live restore's reader marker, as the running one leaves it (its pid: this process, alive).
      const readers = path.join(historyDir(dataDir, 'rs/main'), 'readers');
      fs.mkdirSync(readers, { recursive: true });
      const marker = path.join(readers, 'other.json');
      fs.writeFileSync(marker, JSON.stringify({ pid: process.pid, at: Date.now(), what: 'to somewhere' }));
      const before = dumpHash(db.path);
      try {
        expect(await restore(db, { at: moments[10]! })).toMatchObject({ ok: false, error: { code: 'RESTORE_RUNNING' } });
      } finally {
        fs.rmSync(marker);
      }
      expect(dumpHash(db.path)).toBe(before);
    });

    it('a corrupt segment, or a snapshot whose sha256 does not match', async () => {
      const victim = target('rs/victim');
      await write(victim, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at)');
      const m = await rows(victim, 30);
      const gen = listGenerations(localSource(dataDir, 'rs/victim'))[0]!;
      const seg = listSegments(gen)[0]!;
      const before = dumpHash(victim.path);
      // One byte of a page image in the first segment: its checksum chain breaks there.
      const fd = fs.openSync(seg.dataPath, 'r+');
      fs.writeSync(fd, Buffer.from([0x5a]), 0, 1, 32 + 24 + 100);
      fs.closeSync(fd);
      const bad = await restore(victim, { at: m[20]! });
      expect(bad).toMatchObject({ ok: false, error: { code: 'HISTORY_CORRUPT' } });
      expect((bad as { error: { detail: string } }).error.detail).toContain(`segment ${gen.name}/${seg.name}`);
      expect(dumpHash(victim.path)).toBe(before);
      // The snapshot: one byte changed, its sha256 no longer matches.
      const snap = fs.openSync(gen.snapshotPath, 'r+');
      fs.writeSync(snap, Buffer.from([0x01]), 0, 1, 4000);
      fs.closeSync(snap);
      const badSnap = await restore(victim, { at: gen.snapshot!.at });
      expect(badSnap).toMatchObject({ ok: false, error: { code: 'HISTORY_CORRUPT' } });
      expect((badSnap as { error: { detail: string } }).error.detail).toMatch(/sha256/);
      expect(dumpHash(victim.path)).toBe(before);
      expect(fs.readdirSync(historyDir(dataDir, 'rs/victim')).filter((n) => n.startsWith('restore-'))).toEqual([]);
    });
  });
});
