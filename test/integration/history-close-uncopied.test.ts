// Review R3: DATA_DIR on a full disk, the owning worker SIGKILLed. A child it left behind closed
// a database with no copy into history (its sibling held the write lock to copy, then exited): the
// close was the last, checkpointed the WAL's acknowledged commits into the file and deleted it.
// The next owner found no WAL, and history went on from the file as if nothing were missing:
// restores to moments after those answers answered ok without them. A close must never fold
// frames history lacks into the file, and where a close did (or anything did), the answered
// records newer than history's end mark the stretch lost: restores into it refuse.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { codeOf } from '../../src/errors.ts';
import { forgetCapture } from '../../src/history/capture.ts';
import { historyView } from '../../src/history/history-view.ts';
import { listGenerations, listSegments, localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { readIndex } from '../../src/history/segment-index.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { integrity, pastMs } from '../helpers/history.ts';

let dataDir: string;
let db: DbTarget;
/** The handles of the child that goes away, then of the next owner. */
let handles: HandleCache;
let history: HistoryCapture;
let next: HandleCache | undefined;

const rowsOf = (file: string) => {
  const d = new Database(file, { readonly: true });
  try {
    return d.prepare('SELECT v FROM t ORDER BY id').pluck().all() as string[];
  } finally {
    d.close();
  }
};
/** The rows restored at `at`, or the code a restore refuses with. */
const restoredAt = (at: number): string[] | string => {
  const file = path.join(dataDir, `at-${at}-${Math.random()}.sqlite`);
  try {
    buildRestore(planRestore(localSource(dataDir, db.id), { at }), file);
  } catch (err) {
    return codeOf(err) ?? String(err);
  }
  expect(integrity(file)).toBe('ok');
  return rowsOf(file);
};
const lastCommitAt = () => {
  const gen = listGenerations(localSource(dataDir, db.id)).at(-1)!;
  return (
    listSegments(gen)
      .flatMap((seg) => readIndex(seg.indexPath).commits)
      .at(-1)?.at ?? 0
  );
};

/** Takes the write lock from another process, which exits (without closing) after `ms`. */
async function lockElsewhere(ms: number): Promise<void> {
  const script = `
    const Database = require(${JSON.stringify(createRequire(import.meta.url).resolve('better-sqlite3'))});
    const d = new Database(${JSON.stringify(db.path)}, { timeout: 5000 });
    d.exec('BEGIN IMMEDIATE');
    process.stdout.write('locked\\n');
    setTimeout(() => process.exit(0), ${ms});
  `;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8');
  while (!out.includes('locked')) {
    const [chunk] = (await Promise.race([once(child.stdout, 'data'), once(child, 'exit').then(() => ['exited'])])) as [string];
    if (chunk === 'exited') throw new Error('the locking process exited before it took the lock');
    out += chunk;
  }
}

beforeEach(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-close-uncopied-'));
  db = historyTarget(dataDir, 'cu/a');
  history = new HistoryCapture(dataDir, { checkpointBytes: 1024 * 1024, retentionDays: 30 });
  handles = new HandleCache({ size: 4, ...history.hooks() });
  const live = handles.open(db, 'write');
  live.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
  history.run(live, db);
  live.prepare("INSERT INTO t(v) VALUES ('mine')").run();
  history.run(live, db);
  next = undefined;
});

afterEach(() => {
  next?.closeAll();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('a close that history could not copy before', () => {
  it('waits for the write lock another process holds, and copies before closing: it never closes on frames history lacks', async () => {
    const live = handles.open(db, 'write');
    live.prepare("INSERT INTO t(v) VALUES ('w1')").run();
    // Another child holds the lock to copy, and goes away: a close that skipped its copy was the
    // last, and checkpointed w1 away from history when that child was gone by then.
    await lockElsewhere(200);
    handles.closeAll();
    const closed = Date.now();
    pastMs(closed);
    // Either the handle stays open (its WAL for the next owner), or history holds w1.
    if (!handles.isOpen(db.path)) expect(restoredAt(closed)).toEqual(['mine', 'w1']);
    handles.closeAll();
    expect(handles.isOpen(db.path)).toBe(false);
    expect(restoredAt(Date.now())).toEqual(['mine', 'w1']);
  });

  it('folded into the file with no copy, an acknowledged write makes the stretch after history’s end lost: restores there refuse, never answer without it', () => {
    const mineAt = lastCommitAt();
    pastMs(mineAt);
    const live = handles.open(db, 'write');
    live.prepare("INSERT INTO t(v) VALUES ('w1')").run();
    // Answered (its time noted) before its copy, as every write is...
    history.afterCommit(live, db);
    const ackedAt = Date.now();
    pastMs(ackedAt);
    // ...and the copy never runs: the handle closes as the last connection, which checkpoints w1
    // into the file and deletes the WAL (what the child left behind by its killed worker did).
    live.close();
    expect(fs.existsSync(`${db.path}-wal`)).toBe(false);
    expect(rowsOf(db.path)).toEqual(['mine', 'w1']);

    // The next owner: another process, knowing nothing of this one's capture.
    forgetCapture(db.path);
    const nextHistory = new HistoryCapture(dataDir, { checkpointBytes: 1024 * 1024, retentionDays: 30 });
    next = new HandleCache({ size: 4, ...nextHistory.hooks() });
    // A read first: its close, the last, sealed the file as history's end, so the next WAL's new
    // salts read as the generation going on, and the answered records were never looked at.
    next.open(db, 'read');
    next.closeAll();
    const again = next.open(db, 'write');
    again.prepare("INSERT INTO t(v) VALUES ('later')").run();
    nextHistory.run(again, db);
    next.closeAll();
    const later = Date.now();
    pastMs(later);

    // A moment after w1 was answered holds it or refuses: never the state without it.
    expect(restoredAt(ackedAt)).toBe('HISTORY_LOST');
    expect(restoredAt(mineAt)).toEqual(['mine']);
    const gap = listGenerations(localSource(dataDir, db.id)).at(-1)!;
    expect(gap.snapshot).toMatchObject({ reason: 'gap', lost: true });
    expect(historyView(dataDir, db.id, 30).lost).toEqual([
      { after: new Date(mineAt).toISOString(), before: new Date(gap.snapshot!.at).toISOString(), generation: gap.name },
    ]);
    expect(restoredAt(later)).toEqual(['mine', 'w1', 'later']);
  });

  it('an answered record no later than history’s end is no evidence of loss: a clean close and reopen begin nothing', () => {
    const live = handles.open(db, 'write');
    live.prepare("INSERT INTO t(v) VALUES ('w1')").run();
    history.afterCommit(live, db);
    history.finishCommitted();
    handles.closeAll();
    forgetCapture(db.path);
    const nextHistory = new HistoryCapture(dataDir, { checkpointBytes: 1024 * 1024, retentionDays: 30 });
    next = new HandleCache({ size: 4, ...nextHistory.hooks() });
    next.open(db, 'write');
    next.closeAll();
    expect(listGenerations(localSource(dataDir, db.id)).map((g) => g.snapshot?.reason)).toEqual(['first']);
    const now = Date.now();
    pastMs(now);
    expect(restoredAt(now)).toEqual(['mine', 'w1']);
  });
});
