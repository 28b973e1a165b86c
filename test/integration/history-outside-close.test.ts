// A program outside agentdb commits and checkpoints (TRUNCATE) a database while agentdb has it
// open, then agentdb closes it: the WAL holds nothing to copy, and the file holds commits history
// never saw. History must not take the file for its last commit (sealing it so): it starts again
// from the file. A checkpoint alone (no commit) changes nothing history lacks, and begins nothing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { codeOf } from '../../src/errors.ts';
import { historyView } from '../../src/history/history-view.ts';
import { listGenerations, listSegments, localSource } from '../../src/history/history-files.ts';
import { readIndex } from '../../src/history/segment-index.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { integrity, pastMs } from '../helpers/history.ts';

let dataDir: string;
let db: DbTarget;
let handles: HandleCache;
let history: HistoryCapture;

const rowsOf = (file: string) => {
  const d = new Database(file, { readonly: true });
  try {
    return d.prepare('SELECT v FROM t ORDER BY id').pluck().all() as string[];
  } finally {
    d.close();
  }
};
const restoredAt = (at: number) => {
  const file = path.join(dataDir, `at-${at}-${Math.random()}.sqlite`);
  buildRestore(planRestore(localSource(dataDir, db.id), { at }), file);
  expect(integrity(file)).toBe('ok');
  return rowsOf(file);
};
const readIndexCommits = () => {
  const gen = listGenerations(localSource(dataDir, db.id)).at(-1)!;
  return listSegments(gen).flatMap((seg) => readIndex(seg.indexPath).commits);
};
const reasons = () => listGenerations(localSource(dataDir, db.id)).map((g) => g.snapshot?.reason);
function outside(fn: (d: Database.Database) => void): void {
  const d = new Database(db.path, { timeout: 5000 });
  try {
    fn(d);
  } finally {
    d.close();
  }
}

beforeEach(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-outside-close-'));
  db = historyTarget(dataDir, 'oc/a');
  history = new HistoryCapture(dataDir, { checkpointBytes: 1024 * 1024, retentionDays: 30 });
  handles = new HandleCache({ size: 4, ...history.hooks() });
  const live = handles.open(db, 'write');
  live.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
  history.run(live, db);
  live.prepare("INSERT INTO t(v) VALUES ('mine')").run();
  history.run(live, db);
});

afterEach(() => {
  handles.closeAll();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('a program outside agentdb, while agentdb has the database open', () => {
  it('commits and checkpoints it (TRUNCATE), then agentdb closes it: history starts again from the file, and every later moment restores what the file was', () => {
    const mineAt = readIndexCommits().at(-1)!.at;
    // A moment after that commit: beforeEach may have made it within this same millisecond.
    pastMs(mineAt);
    const before = Date.now();
    pastMs(before);
    outside((d) => {
      d.prepare("INSERT INTO t(v) VALUES ('outside')").run();
      const [res] = d.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
      expect(res!.busy).toBe(0);
    });
    handles.closeAll();
    expect(reasons()).toEqual(['first', 'gap']);
    const closed = Date.now();
    pastMs(closed);
    expect(restoredAt(closed)).toEqual(['mine', 'outside']);
    // When the outside commit was made nobody knows: from the last commit history holds to the
    // gap, restores (and dry runs, planned the same) refuse, and history lists the stretch, where
    // they answered the state before with the outside commit missing (issue 25).
    expect(restoredAt(mineAt)).toEqual(['mine']);
    const lostAt = (at: number) => {
      try {
        planRestore(localSource(dataDir, db.id), { at });
        return undefined;
      } catch (err) {
        return codeOf(err);
      }
    };
    expect(lostAt(before)).toBe('HISTORY_LOST');
    expect(lostAt(mineAt + 1)).toBe('HISTORY_LOST');
    const gap = listGenerations(localSource(dataDir, db.id)).at(-1)!;
    expect(gap.snapshot).toMatchObject({ reason: 'gap', lost: true });
    expect(historyView(dataDir, db.id, 30).lost).toEqual([
      { after: new Date(mineAt).toISOString(), before: new Date(gap.snapshot!.at).toISOString(), generation: gap.name },
    ]);
    // History goes on from there.
    const live = handles.open(db, 'write');
    live.prepare("INSERT INTO t(v) VALUES ('later')").run();
    history.run(live, db);
    const later = Date.now();
    pastMs(later);
    expect(restoredAt(later)).toEqual(['mine', 'outside', 'later']);
    expect(restoredAt(later)).toEqual(rowsOf(db.path));
  });

  it('only checkpoints it (TRUNCATE): nothing was missed, no generation begins', () => {
    outside((d) => {
      const [res] = d.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
      expect(res!.busy).toBe(0);
    });
    handles.closeAll();
    expect(reasons()).toEqual(['first']);
    const live = handles.open(db, 'write');
    live.prepare("INSERT INTO t(v) VALUES ('later')").run();
    history.run(live, db);
    const later = Date.now();
    pastMs(later);
    expect(restoredAt(later)).toEqual(['mine', 'later']);
  });
});
