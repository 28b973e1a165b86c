import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { beforeAll, describe, expect, it } from 'vitest';
import type { HistoryCapture } from '../../src/history/handle-capture.ts';
import { historyView } from '../../src/history/history-view.ts';
import { FolderBlobStore } from '../../src/blobs/folder-blob-store.ts';
import { backupDatabase } from '../../src/history/backup.ts';
import { restoreFromBlob } from '../../src/history/blob-restore.ts';
import { historyDir, localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { restoreInPlace } from '../../src/history/restore-requests.ts';
import { restoreInto } from '../../src/history/restore-into.ts';
import type { RestoreResult } from '../../src/history/restore-result.ts';
import type { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { pastMs } from '../helpers/history.ts';
import { historyOnTmpfs, withDirectHistory } from '../helpers/history-on-tmpfs.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { fillDisk, fillWhenCalled, mountTmpfs, unmountTmpfs } from '../helpers/tmpfs.ts';

// Session 37, F17: a restore in place renames its rebuilt file over the database, then begins
// its new history generation. History's own disk filling in between (an operator's mount, other
// databases' copies) made that step throw: the restore was answered STORAGE_FULL ("no space
// left on device"), retryable, with the database restored and every write after its moment
// undone. It is in place: answered ok, with a note, and history begins from the file (a gap, not
// a loss) once it has room.

const h = historyOnTmpfs('restore-publish-full.test.ts', 'pf/a', '32m');
const { db, dataDir, hdir, refused } = h;
const by = { who: 'operator:publish-full', via: 'operator' as const };

describe.runIf(!refused)('history full between the rename and the new generation', () => {
  let history: HistoryCapture;
  let handles: HandleCache;
  const write = withDirectHistory(h, (d) => {
    ({ history, handles } = d);
  });
  beforeAll(() => {
    write('CREATE TABLE t (k INTEGER PRIMARY KEY, pad TEXT)');
  });

  const rows = () => {
    handles.evict(db.path);
    const c = new Database(db.path, { readonly: true });
    try {
      return c.prepare('SELECT count(*) FROM t').pluck().get() as number;
    } finally {
      c.close();
    }
  };

  it('answers the restore done, with a note, and history begins from the file once it has room', () => {
    write('INSERT INTO t VALUES (1, ?)', 'x');
    const at = Date.now();
    pastMs(at);
    // More pages than a delta restore takes: the rebuilt file is renamed in.
    for (let k = 2; k <= 200; k++) write('INSERT INTO t VALUES (?, ?)', k, 'y'.repeat(3000));
    const before = Date.now();
    pastMs(before);
    const filler = path.join(hdir, 'filler');
    const { answer, fill } = fillWhenCalled(
      filler,
      0,
      (fillDisk) =>
        restoreInPlace(
          handles,
          history,
          dataDir,
          { op: 'restore', db, at, by },
          {
            step: (s) => {
              if (s === 'renamed') fillDisk();
            },
          },
        ) as RestoreResult,
    );
    expect(fill, 'the disk was filled after the rename').toBeDefined();
    // Main: threw ENOSPC (answered STORAGE_FULL) with the database restored.
    expect(answer.undoId).toMatch(/^u/);
    expect(answer.note).toMatch(/^restored; its new history generation could not be begun \(ENOSPC.*begins it from the restored file/);
    expect(rows()).toBe(1);

    // Room again: the next write begins history from the restored file; nothing is lost.
    write('INSERT INTO t VALUES (500, ?)', 'after');
    const after = Date.now();
    pastMs(after);
    expect(historyView(dataDir, db.id, 30).lost).toEqual([]);
    expect(restoreInPlace(handles, history, dataDir, { op: 'restore', db, at: before, by })).not.toHaveProperty('note');
    expect(rows()).toBe(200);
    expect(restoreInPlace(handles, history, dataDir, { op: 'restore', db, at: after, by })).not.toHaveProperty('note');
    expect(rows()).toBe(2);
    expect(restoreInPlace(handles, history, dataDir, { op: 'restore', db, undo: answer.undoId, by })).not.toHaveProperty('note');
    expect(rows()).toBe(200);
  });
  it('answers the restore done the same way when it went in through SQLite beside a process holding the file', async () => {
    // A moment whose state is larger than the room left below, and more pages written after it than a delta restore takes.
    for (let k = 600; k < 900; k++) write('INSERT INTO t VALUES (?, ?)', k, 'z'.repeat(3000));
    const at = Date.now();
    pastMs(at);
    for (let k = 1000; k < 1600; k++) write('INSERT INTO t VALUES (?, ?)', k, 'y'.repeat(3000));
    const want = rows() - 600;
    // A process outside agentdb with the file open: the restore goes in through the backup API.
    const fd = fs.openSync(db.path, 'r');
    const holder = spawn('sleep', ['600'], { stdio: ['ignore', fd, 'ignore'] });
    fs.closeSync(fd);
    const filler = path.join(hdir, 'filler');
    let filled: ReturnType<typeof fillWhenCalled<RestoreResult>>;
    try {
      // Room for the undo point, none for the new generation's snapshot.
      filled = fillWhenCalled(
        filler,
        256 * 1024,
        (fillDisk) =>
          restoreInPlace(
            handles,
            history,
            dataDir,
            { op: 'restore', db, at, by },
            {
              step: (s) => {
                if (s === 'closed') fillDisk();
              },
            },
          ) as RestoreResult,
      );
    } finally {
      holder.kill('SIGKILL');
    }
    const { answer, fill } = filled;
    expect(fill, 'the disk was filled before the copy in').toBeDefined();
    // Main: threw ENOSPC (answered STORAGE_FULL) with the database restored.
    expect(answer.note).toMatch(/^restored; its new history generation could not be begun \(ENOSPC/);
    expect(rows()).toBe(want);
    write('INSERT INTO t VALUES (5000, ?)', 'after');
    expect(historyView(dataDir, db.id, 30).lost).toEqual([]);
    expect(restoreInPlace(handles, history, dataDir, { op: 'restore', db, undo: answer.undoId, by })).not.toHaveProperty('note');
    expect(rows()).toBe(want + 600);
  });
  it('answers a restore into a new database done once the database is made, its history begun by its next open', () => {
    const fork = historyTarget(dataDir, 'pf/fork');
    const forkHistory = historyDir(dataDir, fork.id);
    fs.mkdirSync(forkHistory, { recursive: true });
    expect(mountTmpfs(forkHistory, '8m')).toBeUndefined();
    const filler = path.join(forkHistory, 'filler');
    try {
      const want = rows();
      const at = Date.now();
      pastMs(at);
      write('INSERT INTO t VALUES (9000, ?)', 'later');
      const { answer, fill } = fillWhenCalled(
        filler,
        0,
        (fillDisk) =>
          restoreInto(
            handles,
            history,
            dataDir,
            { op: 'restoreInto', db: fork, source: db.id, from: db, at, by, opId: 'fork-1' },
            {
              step: (s) => {
                if (s === 'renamed') fillDisk();
              },
            },
          ) as RestoreResult,
      );
      expect(fill, 'the disk was filled after the database was made').toBeDefined();
      // Main: threw ENOSPC (answered STORAGE_FULL "nothing was written"), the database made, and
      // the same op again answered DATABASE_EXISTS.
      expect(answer.note).toMatch(/^restored; its new history generation could not be begun \(ENOSPC/);
      expect(restoreInto(handles, history, dataDir, { op: 'restoreInto', db: fork, source: db.id, from: db, at, by, opId: 'fork-1' })).toMatchObject({
        into: fork.id,
      });
      handles.evict(fork.path);
      const c = new Database(fork.path, { readonly: true });
      try {
        expect(c.prepare('SELECT count(*) FROM t').pluck().get()).toBe(want);
      } finally {
        c.close();
      }
      expect(historyView(dataDir, fork.id, 30).generations.length).toBeGreaterThan(0);
    } finally {
      handles.evict(fork.path);
      unmountTmpfs(forkHistory);
    }
  });
  it('answers a restore from the blob store done once its database is placed, its history begun by its next open', async () => {
    const made = historyTarget(dataDir, 'pf/blob');
    const madeHistory = historyDir(dataDir, made.id);
    fs.mkdirSync(madeHistory, { recursive: true });
    expect(mountTmpfs(madeHistory, '32m')).toBeUndefined();
    const filler = path.join(madeHistory, 'filler');
    let fill: { fd: number } | undefined;
    try {
      const want = rows();
      const store = new FolderBlobStore(path.join(dataDir, 'blobs'));
      await backupDatabase(store, dataDir, db.id);
      const answer = await restoreFromBlob(store, {
        id: db.id,
        into: made.id,
        dbPath: made.path,
        workDir: path.join(dataDir, 'work'),
        history: localSource(dataDir, made.id),
        onPlaced: () => {
          fill = fillDisk(filler);
        },
      }).finally(() => {
        if (fill) fs.closeSync(fill.fd);
        fs.rmSync(filler, { force: true });
      });
      // Main: threw ENOSPC (answered failed) with the database placed.
      expect(answer.note).toMatch(/^restored; its new history generation could not be begun \(ENOSPC/);
      // What local history holds at the backup's moment, as the blob store's restore made it.
      const local = path.join(dataDir, 'local-at.sqlite');
      buildRestore(planRestore(localSource(dataDir, db.id), { at: Date.parse(answer.restoredTo) }), local);
      const count = (file: string) => {
        const c = new Database(file, { readonly: true });
        try {
          return c.prepare('SELECT count(*) FROM t').pluck().get() as number;
        } finally {
          c.close();
        }
      };
      expect(count(made.path)).toBe(count(local));
      expect(count(made.path)).toBeGreaterThan(want - 10);
      handles.open(made, 'write');
      expect(historyView(dataDir, made.id, 30).generations.length).toBeGreaterThan(0);
    } finally {
      handles.evict(made.path);
      unmountTmpfs(madeHistory);
    }
  });
});
