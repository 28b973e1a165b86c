import { spawn } from 'node:child_process';
import fs from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { HistoryCapture } from '../../src/history/handle-capture.ts';
import { historyView } from '../../src/history/history-view.ts';
import { restoreInPlace } from '../../src/history/restore-requests.ts';
import type { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { pastMs } from '../helpers/history.ts';
import { historyOnTmpfs, withDirectHistory } from '../helpers/history-on-tmpfs.ts';

// Session 37, F18: a restore in place that goes in through SQLite (another process has the file
// open) adopts the file it rebuilt as its new generation's snapshot by renaming it into history.
// With history on a disk of its own that rename fails (EXDEV), and the generation fell back to a
// gap marked lost, from the last commit to the restore: a restore to a moment there answered
// HISTORY_LOST, and `agentdb history` listed a lost stretch, though nothing was lost.

const h = historyOnTmpfs('restore-sqlite-history-mount.test.ts', 'hm/a', '32m');
const { db, dataDir, refused } = h;
const by = { who: 'operator:history-mount', via: 'operator' as const };

describe.runIf(!refused)('a restore in place through SQLite, history on a disk of its own', () => {
  let history: HistoryCapture;
  let handles: HandleCache;
  const write = withDirectHistory(h, (d) => {
    ({ history, handles } = d);
  });
  const count = () => {
    handles.closeAll();
    const c = new Database(db.path, { readonly: true });
    try {
      return c.prepare('SELECT count(*) FROM t').pluck().get() as number;
    } finally {
      c.close();
    }
  };

  it('begins its generation from the rebuilt file, no stretch lost, and the moment just before it restores', () => {
    write('CREATE TABLE t (k INTEGER PRIMARY KEY, pad TEXT)');
    for (let k = 0; k < 100; k++) write('INSERT INTO t VALUES (?, ?)', k, 'z'.repeat(3000));
    const at = Date.now();
    pastMs(at);
    for (let k = 1000; k < 1300; k++) write('INSERT INTO t VALUES (?, ?)', k, 'y'.repeat(3000));
    const justBefore = Date.now();
    pastMs(justBefore);
    const fd = fs.openSync(db.path, 'r');
    const holder = spawn('sleep', ['600'], { stdio: ['ignore', fd, 'ignore'] });
    fs.closeSync(fd);
    try {
      expect(restoreInPlace(handles, history, dataDir, { op: 'restore', db, at, by })).not.toHaveProperty('note');
      expect(count()).toBe(100);
      const view = historyView(dataDir, db.id, 30);
      // Main: a 'gap' generation and a lost stretch from the last commit to the restore.
      expect(view.generations.map((g) => g.reason)).toEqual(['first', 'restore']);
      expect(view.lost).toEqual([]);
      // Main: HISTORY_LOST.
      expect(restoreInPlace(handles, history, dataDir, { op: 'restore', db, at: justBefore, by })).not.toHaveProperty('note');
      expect(count()).toBe(400);
    } finally {
      holder.kill('SIGKILL');
    }
  });
});
