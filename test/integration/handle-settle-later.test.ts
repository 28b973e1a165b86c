import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { forgetCapture } from '../../src/history/capture.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { markRestoreLeaving } from '../../src/history/seal.ts';
import { HandleCache, type HandleTarget } from '../../src/sqlite/handle-cache.ts';
import { pastMs } from '../helpers/history.ts';

// The executor child's cache (`settleLater`): a read of a database whose handle is not open
// answers before the least recently used handle is closed; `settle`, run once the answer is
// sent, closes it (issue 31). History's look at the new handle is not put off: what a read saw
// is in history from the moment it answered. The cache stays bounded.
describe('a handle cache that settles after the answer', () => {
  let dataDir: string;
  let history: HistoryCapture;
  let cache: HandleCache;
  let closed: string[];
  const target = (name: string): HandleTarget => ({ id: `w/${name}`, path: databasePath(dataDir, 'w', name, 0), shard: 0 });
  const rows = (t: HandleTarget) => cache.open(t, 'query').prepare('SELECT x FROM t ORDER BY x').pluck().all();
  const generations = (t: HandleTarget) => listGenerations(localSource(dataDir, t.id)).length;
  const restoredRows = (t: HandleTarget, at: number) => {
    const file = path.join(dataDir, `restored-${at}.sqlite`);
    buildRestore(planRestore(localSource(dataDir, t.id), { at }), file);
    const db = new Database(file, { readonly: true });
    try {
      return db.prepare('SELECT x FROM t ORDER BY x').pluck().all();
    } finally {
      db.close();
    }
  };

  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-settle-later-'));
    history = new HistoryCapture(dataDir, { checkpointBytes: 4 << 20, retentionDays: 30 });
    closed = [];
    const hooks = history.hooks();
    cache = new HandleCache({
      size: 2,
      settleLater: true,
      ...hooks,
      afterClose: (t, token) => {
        closed.push(t.id);
        hooks.afterClose!(t, token);
      },
    });
    for (const name of ['a', 'b', 'c', 'd']) {
      const t = target(name);
      const db = cache.open(t, 'write');
      db.exec('CREATE TABLE t (x); INSERT INTO t VALUES (1)');
      history.run(db, t);
    }
    cache.closeAll();
    closed = [];
  });
  afterEach(() => {
    cache.closeAll();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('closes the least recently used handle once settled, never holding more than one handle past its size', () => {
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map(target) as [HandleTarget, HandleTarget, HandleTarget, HandleTarget];
    expect(rows(a)).toEqual([1]);
    expect(rows(b)).toEqual([1]);
    expect(rows(c)).toEqual([1]);
    // The read of c was answered with a's handle still open.
    expect(closed).toEqual([]);
    expect(cache.size).toBe(3);
    cache.settle();
    expect(closed).toEqual(['w/a']);
    expect(cache.isOpen(a.path)).toBe(false);
    expect(cache.size).toBe(2);
    // Opened in a row without settling (pipelined requests): each open settles the one before.
    expect(rows(d)).toEqual([1]);
    expect(rows(a)).toEqual([1]);
    expect(cache.size).toBe(3);
    expect(closed).toEqual(['w/a', 'w/b']);
    cache.settle();
    expect(cache.size).toBe(2);
  });

  it('copies what another program left in the WAL when a read opens the handle, before settling', () => {
    const a = target('a');
    const other = new Database(a.path);
    other.pragma('wal_autocheckpoint = 0');
    other.prepare('INSERT INTO t VALUES (2)').run();
    // A fresh child: what it knows of a's history comes from the files.
    forgetCapture(a.path);
    expect(rows(a)).toEqual([1, 2]);
    const at = Date.now();
    pastMs(at);
    // Restored to the moment the read answered, before anything was settled or closed.
    expect(restoredRows(a, at)).toEqual([1, 2]);
    other.close();
    cache.settle();
    cache.closeAll();
    expect(fs.existsSync(`${a.path}-wal`)).toBe(false);
    expect(restoredRows(a, at)).toEqual([1, 2]);
  });

  it('begins a generation after a restore that crashed once marked, at the first read, before settling', () => {
    const a = target('a');
    markRestoreLeaving(listGenerations(localSource(dataDir, a.id)).at(-1)!.dir);
    forgetCapture(a.path);
    expect(rows(a)).toEqual([1]);
    expect(generations(a)).toBe(2);
  });
});
