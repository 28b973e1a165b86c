import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupDatabase } from '../../src/history/backup.ts';
import { restoreFromBlob } from '../../src/history/blob-restore.ts';
import { FolderBlobStore } from '../../src/blobs/folder-blob-store.ts';
import { historyView } from '../../src/history/history-view.ts';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { pruneHistory } from '../../src/history/prune.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { sha256File } from '../../src/history/snapshot.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { restoreInPlace, type RestoreHooks } from '../../src/history/restore-requests.ts';
import { restoreInto } from '../../src/history/restore-into.ts';
import { snapshotNow } from '../../src/history/snapshot-now.ts';
import { dumpHash, integrity, pastMs } from '../helpers/history.ts';
import { historyTarget } from '../helpers/history-pool.ts';

// Hostile review of restores that begin a generation from a linked snapshot plus a base commit:
// repeated restores and undos, forks of forks, backups of a linked generation nobody wrote to
// since, and the snapshot files never changing under any of it. In process, so a test can act
// between the steps of a restore.
let dataDir: string;
let history: HistoryCapture;
let handles: HandleCache;
beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-linked-hostile-'));
  history = new HistoryCapture(dataDir, { checkpointBytes: 64 * 1024, retentionDays: 30 });
  handles = new HandleCache({ size: 4, ...history.hooks() });
});
afterAll(() => {
  handles.closeAll();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const by = { who: 'operator:hostile', via: 'operator' as const };
const target = (id: string): DbTarget => historyTarget(dataDir, id);

function write(db: DbTarget, sql: string, ...params: unknown[]): void {
  const h = handles.open(db, 'write');
  h.prepare(sql).run(...params);
  history.run(h, db);
}

/** Every snapshot still the bytes its snapshot.json names. */
function snapshotsIntact(id: string): void {
  for (const g of listGenerations(localSource(dataDir, id))) {
    if (!g.snapshot) continue;
    expect(sha256File(g.snapshotPath), `${id} ${g.name}`).toBe(g.snapshot.sha256);
  }
}

/** The live database's dump now (every handle closed first, so the file alone is it). */
function liveDump(db: DbTarget): string {
  handles.evict(db.path);
  return dumpHash(db.path);
}

let n = 0;
function restoredAt(id: string, at: number): string {
  const file = path.join(dataDir, `check-${++n}.sqlite`);
  buildRestore(planRestore(localSource(dataDir, id), { at }), file);
  try {
    expect(integrity(file)).toBe('ok');
    return dumpHash(file);
  } finally {
    fs.rmSync(file, { force: true });
  }
}

/** Records the live state at a moment after now, for {@link everyMomentRight}. */
function moment(db: DbTarget, seen: { at: number; dump: string }[]): number {
  const dump = liveDump(db);
  const at = Date.now();
  pastMs(at);
  seen.push({ at, dump });
  return at;
}

function everyMomentRight(id: string, seen: { at: number; dump: string }[]): void {
  for (const s of seen) expect(restoredAt(id, s.at), `${id} at ${new Date(s.at).toISOString()}`).toBe(s.dump);
}

describe('restores that begin a linked generation', () => {
  it('restore, undo, restore again many times: every moment restores right, no snapshot ever changes', async () => {
    const db = target('lh/cycle');
    write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    for (let i = 0; i < 400; i++) write(db, 'INSERT INTO t(v) VALUES (?)', `a${i}-${'x'.repeat(2000)}`);
    const seen: { at: number; dump: string }[] = [];
    const t1 = moment(db, seen);
    // Most of the file changes since t1, and a snapshot in between: the restore copies a file in.
    write(db, "UPDATE t SET v = v || 'y'");
    snapshotNow(handles, history, dataDir, { op: 'snapshot', db, reason: 'nightly' });
    write(db, "UPDATE t SET v = 'z' || v");
    const t2 = moment(db, seen);
    const undos: string[] = [];
    for (let round = 0; round < 4; round++) {
      const r = restoreInPlace(handles, history, dataDir, { op: 'restore', db, at: round % 2 ? t2 : t1, by });
      undos.push(r.undoId!);
      moment(db, seen);
      snapshotsIntact(db.id);
      const u = restoreInPlace(handles, history, dataDir, { op: 'restore', db, undo: r.undoId!, by });
      expect(u.discardsCommits).toBe(0);
      moment(db, seen);
      snapshotsIntact(db.id);
      if (round === 1) write(db, 'DELETE FROM t WHERE id > 20');
      if (round === 2) write(db, 'VACUUM');
    }
    everyMomentRight(db.id, seen);
    // The restores copied files in (linked generations), not only single commits.
    expect(listGenerations(localSource(dataDir, db.id)).filter((g) => g.snapshot?.base).length).toBeGreaterThan(2);
  });

  it('a fork of a fork, restored to moments of its first generation, and its backup restored from the blob store', async () => {
    const src = target('lh/src');
    write(src, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    for (let i = 0; i < 400; i++) write(src, 'INSERT INTO t(v) VALUES (?)', `s${i}-${'q'.repeat(2000)}`);
    const srcSeen: { at: number; dump: string }[] = [];
    const s1 = moment(src, srcSeen);
    write(src, 'DELETE FROM t WHERE id > 10');
    moment(src, srcSeen);

    const fork = target('lh/fork');
    restoreInto(handles, history, dataDir, { op: 'restoreInto', db: fork, source: src.id, at: s1, by });
    const forkSeen: { at: number; dump: string }[] = [];
    const f0 = moment(fork, forkSeen);
    expect(liveDump(fork)).not.toBe(liveDump(src));
    write(fork, 'UPDATE t SET v = upper(v) WHERE id < 50');
    moment(fork, forkSeen);
    // Back to its first moments in place, then a fork of the fork at its first moment.
    restoreInPlace(handles, history, dataDir, { op: 'restore', db: fork, at: f0, by });
    moment(fork, forkSeen);
    const fork2 = target('lh/fork2');
    restoreInto(handles, history, dataDir, { op: 'restoreInto', db: fork2, source: fork.id, at: f0, by });
    const f2Seen: { at: number; dump: string }[] = [];
    moment(fork2, f2Seen);
    for (const id of [src.id, fork.id, fork2.id]) snapshotsIntact(id);
    expect(listGenerations(localSource(dataDir, fork.id))[0]!.snapshot!.base).toBeDefined();
    everyMomentRight(src.id, srcSeen);
    everyMomentRight(fork.id, forkSeen);
    everyMomentRight(fork2.id, f2Seen);

    // Backups of linked generations with no writes after them, then a disaster restore of each.
    const store = new FolderBlobStore(path.join(dataDir, 'blobs'));
    // What the backup holds restores exactly as the local history does at the same moment.
    for (const db of [fork2, fork]) {
      await backupDatabase(store, dataDir, db.id);
      const out = path.join(dataDir, 'disaster', `${db.id.replace('/', '_')}.sqlite`);
      const r = await restoreFromBlob(store, { id: db.id, dbPath: out, workDir: path.join(dataDir, 'work') });
      expect(dumpHash(out), db.id).toBe(restoredAt(db.id, Date.parse(r.restoredTo)));
    }
  });

  it('a database whose latest generation is a restore nobody wrote to since: backed up and restored from the blob store whole', async () => {
    const db = target('lh/blob');
    write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    for (let i = 0; i < 400; i++) write(db, 'INSERT INTO t(v) VALUES (?)', `b${i}-${'w'.repeat(2000)}`);
    const seen: { at: number; dump: string }[] = [];
    const t1 = moment(db, seen);
    write(db, "UPDATE t SET v = 'changed ' || v");
    write(db, 'DELETE FROM t WHERE id % 3 = 0');
    moment(db, seen);
    const r = restoreInPlace(handles, history, dataDir, { op: 'restore', db, at: t1, by });
    const gen = listGenerations(localSource(dataDir, db.id)).at(-1)!;
    expect(gen.snapshot!.base).toBeDefined();
    // Its base commit is the restore itself: a restore to its moment replays no commit, as the
    // history view says (it counted one, the history view none).
    const now = Date.now();
    pastMs(now);
    const dry = restoreInPlace(handles, history, dataDir, { op: 'restore', db, at: now, by, dryRun: true });
    expect(dry.snapshot.id).toBe(gen.name);
    expect(dry.commits).toBe(historyView(dataDir, db.id, 30).generations.at(-1)!.commits);
    expect(dry.commits).toBe(0);
    const live = liveDump(db);
    const store = new FolderBlobStore(path.join(dataDir, 'blobs2'));
    await backupDatabase(store, dataDir, db.id);
    const out = path.join(dataDir, 'disaster', 'blob.sqlite');
    await restoreFromBlob(store, { id: db.id, dbPath: out, workDir: path.join(dataDir, 'work') });
    expect(dumpHash(out)).toBe(live);
    // And the undo of that restore, then its undo point's moment, from the blob store too.
    restoreInPlace(handles, history, dataDir, { op: 'restore', db, undo: r.undoId!, by });
    moment(db, seen);
    everyMomentRight(db.id, seen);
    snapshotsIntact(db.id);
  });

  it('a gap found while the restore closes the database (a program outside wrote) does not remove the generation it prepared', () => {
    const db = target('lh/gap');
    write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    for (let i = 0; i < 400; i++) write(db, 'INSERT INTO t(v) VALUES (?)', `g${i}-${'v'.repeat(2000)}`);
    const seen: { at: number; dump: string }[] = [];
    const t1 = moment(db, seen);
    write(db, "UPDATE t SET v = 'changed ' || v");
    snapshotNow(handles, history, dataDir, { op: 'snapshot', db, reason: 'manual' });
    const from = listGenerations(localSource(dataDir, db.id))[0]!;
    handles.open(db, 'write');
    const hooks: RestoreHooks = {
      step(name) {
        if (name !== 'copied') return;
        // Another program writes while the restore runs, and checkpoints: capture sees a gap
        // when the restore closes the database, and begins a generation of what it finds.
        const conn = new Database(db.path);
        try {
          conn.prepare("INSERT INTO t(v) VALUES ('outside')").run();
          conn.pragma('wal_checkpoint(TRUNCATE)');
          conn.prepare("INSERT INTO t(v) VALUES ('outside again')").run();
        } finally {
          conn.close();
        }
      },
    };
    // It answered ENOENT (its prepared generation removed by the gap's snapshot) after it had
    // put the restored file in place, and history went on saying the file was the one before.
    const r = restoreInPlace(handles, history, dataDir, { op: 'restore', db, at: t1, by }, hooks);
    expect(sha256File(from.snapshotPath)).toBe(from.snapshot!.sha256);
    snapshotsIntact(db.id);
    const gens = listGenerations(localSource(dataDir, db.id));
    expect(gens.map((g) => g.snapshot!.reason)).toEqual(['first', 'manual', 'gap', 'restore']);
    expect(gens.at(-1)!.snapshot!.base).toBeDefined();
    const live = liveDump(db);
    const now = Date.now();
    pastMs(now);
    expect(restoredAt(db.id, now)).toBe(live);
    // The undo goes back to the state the gap found, the outside writes in it.
    restoreInPlace(handles, history, dataDir, { op: 'restore', db, undo: r.undoId!, by });
    handles.evict(db.path);
    const conn = new Database(db.path);
    try {
      expect(conn.prepare("SELECT count(*) FROM t WHERE v LIKE 'outside%'").pluck().get()).toBe(2);
      expect(conn.prepare("SELECT count(*) FROM t WHERE v LIKE 'changed%'").pluck().get()).toBe(400);
    } finally {
      conn.close();
    }
  });

  it("pruning the generation whose snapshot a restore linked leaves the restore's generation whole", () => {
    const db = target('lh/prune');
    write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    for (let i = 0; i < 400; i++) write(db, 'INSERT INTO t(v) VALUES (?)', `p${i}-${'p'.repeat(2000)}`);
    const seen: { at: number; dump: string }[] = [];
    const t1 = moment(db, seen);
    write(db, "UPDATE t SET v = 'changed ' || v");
    restoreInPlace(handles, history, dataDir, { op: 'restore', db, at: t1, by });
    const linked = listGenerations(localSource(dataDir, db.id)).at(-1)!;
    expect(linked.snapshot!.base).toBeDefined();
    const after = moment(db, seen);
    write(db, "INSERT INTO t(v) VALUES ('after the restore')");
    moment(db, seen);
    // A day past the window for every generation but the restore's, which is the window's base.
    pruneHistory(dataDir, { now: linked.snapshot!.at + 31 * 24 * 3600 * 1000, retentionDays: 30 });
    const gens = listGenerations(localSource(dataDir, db.id));
    expect(gens.map((g) => g.name)).toEqual([linked.name]);
    snapshotsIntact(db.id);
    everyMomentRight(
      db.id,
      seen.filter((s) => s.at >= after),
    );
  });
});
