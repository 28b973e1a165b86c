import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { HistoryCapture } from '../../src/history/handle-capture.ts';
import { historyView } from '../../src/history/history-view.ts';
import { restoreInPlace } from '../../src/history/restore-requests.ts';
import type { RestoreResult } from '../../src/history/restore-result.ts';
import type { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { pastMs } from '../helpers/history.ts';
import { historyOnTmpfs, withDirectHistory } from '../helpers/history-on-tmpfs.ts';
import { fillDisk } from '../helpers/tmpfs.ts';

// Session 37, F18 (F17's leftover): a restore in place that went in through SQLite (another
// process holds the file) and could not begin its new history generation (history's disk full)
// is answered done with a note, but its close cannot copy the restore's commit into history: the
// handle stays open. What the next calls on that database get while the disk stays full, and
// once it has room: nothing lost, the handle closed once it can be, each refusal clear.

const h = historyOnTmpfs('restore-sqlite-kept-handle.test.ts', 'kh/a', '32m');
const { db, dataDir, hdir, refused } = h;
const by = { who: 'operator:kept-handle', via: 'operator' as const };

describe.runIf(!refused)('the SQLite way of a restore in place, its handle kept open on a full history disk', () => {
  let history: HistoryCapture;
  let handles: HandleCache;
  const write = withDirectHistory(h, (d) => {
    ({ history, handles } = d);
  });

  const keysOnDisk = () => {
    const c = new Database(db.path, { readonly: true });
    try {
      return c.prepare('SELECT count(*) FROM t').pluck().get() as number;
    } finally {
      c.close();
    }
  };

  it('reads and writes on the kept handle, refuses the next restore, holds it at the idle close, and closes it once history has room, losing nothing', () => {
    write('CREATE TABLE t (k INTEGER PRIMARY KEY, pad TEXT)');
    for (let k = 0; k < 300; k++) write('INSERT INTO t VALUES (?, ?)', k, 'z'.repeat(3000));
    const at = Date.now();
    pastMs(at);
    for (let k = 1000; k < 1600; k++) write('INSERT INTO t VALUES (?, ?)', k, 'y'.repeat(3000));
    const fd = fs.openSync(db.path, 'r');
    const holder = spawn('sleep', ['600'], { stdio: ['ignore', fd, 'ignore'] });
    fs.closeSync(fd);
    const filler = path.join(hdir, 'filler');
    let fill: { fd: number; size: number } | undefined;
    try {
      const answer = restoreInPlace(
        handles,
        history,
        dataDir,
        { op: 'restore', db, at, by },
        {
          step: (s) => {
            if (s !== 'closed') return;
            fill = fillDisk(filler);
            fs.ftruncateSync(fill.fd, fill.size - 256 * 1024);
          },
        },
      ) as RestoreResult;
      expect(answer.note).toMatch(/^restored; its new history generation could not be begun \(ENOSPC/);
      // The disk stays full. The handle is kept, not closed: closing would checkpoint the
      // restore's commit, which history lacks, out of the WAL.
      expect(handles.isOpen(db.path)).toBe(true);
      expect(() => handles.evict(db.path)).toThrow(/ENOSPC/);
      // A read on it sees the restored state; a write commits into the WAL (history behind).
      const c = handles.open(db, 'read');
      expect(c.prepare('SELECT count(*) FROM t').pluck().get()).toBe(300);
      write('INSERT INTO t VALUES (?, ?)', 5000, 'during');
      expect(handles.open(db, 'read').prepare('SELECT count(*) FROM t').pluck().get()).toBe(301);
      // The next restore in place cannot close it either: refused, nothing changed.
      expect(() => restoreInPlace(handles, history, dataDir, { op: 'restore', db, undo: answer.undoId, by })).toThrow(/ENOSPC|STORAGE_FULL/);
      expect(handles.open(db, 'read').prepare('SELECT count(*) FROM t').pluck().get()).toBe(301);
      // The idle close holds it (not closed, not lost) while the copy fails.
      handles.closeAll();
      expect(handles.heldOpen).toBe(1);

      // Room again: the next write copies what waited (a gap begun from the restored file, the
      // write while full in it); nothing of history is lost, and the idle close closes the handle.
      fs.closeSync(fill!.fd);
      fs.rmSync(filler, { force: true });
      fill = undefined;
      write('INSERT INTO t VALUES (?, ?)', 5001, 'room');
      expect(historyView(dataDir, db.id, 30).lost).toEqual([]);
      const after = Date.now();
      pastMs(after);
      handles.closeAll();
      expect(handles.heldOpen).toBe(0);
      expect(handles.size).toBe(0);
      expect(keysOnDisk()).toBe(302);
      // The undo is whole: the state before the restore; the moment after the write while full has it.
      expect(restoreInPlace(handles, history, dataDir, { op: 'restore', db, undo: answer.undoId, by })).not.toHaveProperty('note');
      handles.closeAll();
      expect(keysOnDisk()).toBe(900);
      // And the moment after the kept handle closed: its undo's generation marked no stretch lost
      // (main: HISTORY_LOST, its rebuilt file not renamed onto history's own disk, see
      // restore-sqlite-history-mount.test.ts).
      expect(historyView(dataDir, db.id, 30).lost).toEqual([]);
      expect(restoreInPlace(handles, history, dataDir, { op: 'restore', db, at: after, by })).not.toHaveProperty('note');
      handles.closeAll();
      expect(keysOnDisk()).toBe(302);
    } finally {
      holder.kill('SIGKILL');
      if (fill) {
        fs.closeSync(fill.fd);
        fs.rmSync(filler, { force: true });
      }
    }
  });
});
