import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { forgetCapture } from '../../src/history/capture.ts';
import { loadState, states } from '../../src/history/capture-state.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { historyDir, listGenerations, localSource } from '../../src/history/history-files.ts';
import { markRestoreLeaving } from '../../src/history/seal.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { HandleCache, type HandleTarget } from '../../src/sqlite/handle-cache.ts';
import { dumpHash, pastMs } from '../helpers/history.ts';

// A handle opened only to query skips history's copy on open, and closes without a copy or a
// seal when its WAL is empty (issue 31: most handle cache misses with many databases). History
// must still hold every commit: frames another program left in the WAL are copied before the
// close checkpoints them, and before the first write through the handle.
describe('handles opened only to query', () => {
  let dataDir: string;
  let target: HandleTarget;
  let history: HistoryCapture;
  let cache: HandleCache;
  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-query-handles-'));
    target = { id: 'w/a', path: databasePath(dataDir, 'w', 'a', 0), shard: 0 };
    history = new HistoryCapture(dataDir, { checkpointBytes: 4 << 20, retentionDays: 30 });
    cache = new HandleCache({ size: 4, ...history.hooks() });
    write('CREATE TABLE t (x); INSERT INTO t VALUES (1)');
    cache.closeAll();
  });
  afterEach(() => {
    cache.closeAll();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const write = (sql: string) => {
    const db = cache.open(target, 'write');
    db.exec(sql);
    history.run(db, target);
  };
  const count = () => (cache.open(target, 'query').prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
  const generations = () => listGenerations(localSource(dataDir, target.id)).length;
  /** Every file of the database's history, with its size and modification time. */
  const historyFiles = () => {
    const root = historyDir(dataDir, target.id);
    return (fs.readdirSync(root, { recursive: true }) as string[]).sort().map((f) => {
      const st = fs.statSync(path.join(root, f), { bigint: true });
      return `${f} ${st.ino} ${st.size} ${st.mtimeNs}`;
    });
  };
  /** The database rebuilt from its history at `at`. */
  const restoredRows = (at: number) => {
    const file = path.join(dataDir, `restored-${at}.sqlite`);
    buildRestore(planRestore(localSource(dataDir, target.id), { at }), file);
    const db = new Database(file, { readonly: true });
    try {
      return db.prepare('SELECT x FROM t ORDER BY x').pluck().all();
    } finally {
      db.close();
    }
  };

  it('leaves history untouched, and the next write goes on in the same generation', () => {
    const before = historyFiles();
    for (let i = 0; i < 3; i++) {
      expect(count()).toBe(1);
      cache.closeAll();
    }
    expect(historyFiles()).toEqual(before);
    write('INSERT INTO t VALUES (2)');
    cache.closeAll();
    expect(generations()).toBe(1);
    const at = Date.now();
    pastMs(at);
    expect(restoredRows(at)).toEqual([1, 2]);
  });

  it('puts the copy off in a process that never captured the database, as its history files show it sealed', () => {
    // A fresh child knows nothing of the database: what it knows comes from the files.
    const onOpened = history.hooks().onOpened!;
    const opened = () => {
      forgetCapture(target.path);
      const db = new Database(target.path);
      try {
        return onOpened(db, target, 'query');
      } finally {
        db.close();
      }
    };
    expect(opened()).toBe(false);
    // Written behind history's back (the file changed, its WAL checkpointed away): captured on open.
    const other = new Database(target.path);
    other.prepare('INSERT INTO t VALUES (6)').run();
    other.close();
    expect(opened()).toBe(true);
    expect(generations()).toBe(2);
    expect(opened()).toBe(false);
    // An index whose last line a crash cut short: a capture under the lock mends it first.
    write('INSERT INTO t VALUES (7)');
    cache.closeAll();
    const segments = path.join(listGenerations(localSource(dataDir, target.id)).at(-1)!.dir, 'segments');
    const index = fs
      .readdirSync(segments)
      .filter((f) => f.endsWith('.idx'))
      .sort()
      .at(-1)!;
    fs.appendFileSync(path.join(segments, index), '{"torn');
    expect(opened()).toBe(true);
    expect(opened()).toBe(false);
    // A restore that crashed after marking the generation it leaves: captured on open.
    markRestoreLeaving(listGenerations(localSource(dataDir, target.id)).at(-1)!.dir);
    expect(opened()).toBe(true);
  });

  it('keeps what it knows of a bounded number of databases, not of every one it opened', () => {
    const source = localSource(dataDir, target.id);
    for (let i = 0; i < 5000; i++) loadState(path.join(dataDir, `not-open-${i}.sqlite`), source, false);
    expect(states.size).toBeLessThanOrEqual(4096);
    for (let i = 0; i < 5000; i++) states.delete(path.join(dataDir, `not-open-${i}.sqlite`));
  });

  it('lets go of the states used least recently first, not the ones loaded first', () => {
    // Review R3: let go in the order first loaded, one tenant cycling through databases pushed
    // out another's states in use. Loaded first, used again after 3,000 others, then 2,000 more:
    // past the bound, the sweep lets the 3,000 go before it.
    const source = localSource(dataDir, target.id);
    const others = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => path.join(dataDir, `other-${from + i}.sqlite`));
    const hot = path.join(dataDir, 'hot.sqlite');
    const st = loadState(hot, source, false);
    expect(st).toBeDefined();
    for (const p of others(0, 3000)) loadState(p, source, false);
    expect(loadState(hot, source, false)).toBe(st);
    for (const p of others(3000, 5000)) loadState(p, source, false);
    expect(states.size).toBeLessThanOrEqual(4096);
    expect(states.has(path.join(dataDir, 'other-0.sqlite'))).toBe(false);
    expect(states.get(hot)).toBe(st);
    for (const p of [hot, ...others(0, 5000)]) states.delete(p);
  });

  it('copies what another program left in the WAL before its close checkpoints it', () => {
    const other = new Database(target.path);
    other.pragma('wal_autocheckpoint = 0');
    other.prepare('INSERT INTO t VALUES (3)').run();
    expect(count()).toBe(2);
    // Not the last connection: the other program's frames stay in the WAL for the query handle's close.
    other.close();
    expect(fs.statSync(`${target.path}-wal`).size).toBeGreaterThan(0);
    cache.closeAll();
    expect(fs.existsSync(`${target.path}-wal`)).toBe(false);
    const at = Date.now();
    pastMs(at);
    expect(restoredRows(at)).toEqual([1, 3]);
    expect(generations()).toBe(1);
    const restored = path.join(dataDir, `restored-${at}.sqlite`);
    expect(dumpHash(restored)).toBe(dumpHash(target.path));
  });

  it('copies what another program committed before the first write through a queried handle', () => {
    expect(count()).toBe(1);
    const other = new Database(target.path);
    other.pragma('wal_autocheckpoint = 0');
    other.prepare('INSERT INTO t VALUES (4)').run();
    other.close();
    // The same handle, now for a write: history's copy on open runs first, at this moment.
    const db = cache.open(target, 'write');
    const between = Date.now();
    pastMs(between);
    db.exec('INSERT INTO t VALUES (5)');
    history.run(db, target);
    cache.closeAll();
    expect(restoredRows(between)).toEqual([1, 4]);
    const at = Date.now();
    pastMs(at);
    expect(restoredRows(at)).toEqual([1, 4, 5]);
  });
});
