// Review R4: DATA_DIR on a full disk, the owning worker SIGKILLed. Its child had answered writes
// whose copies failed (no room): their answer times were in the answered file, and in that child's
// memory, gone with it. The next owner's child opened the database and tried to copy (failing, still
// no room); room came back between its catch-up and its next write, whose own copy then copied the
// killed child's commits too, stamped with its time, seconds later: the answered file is read only
// by a capture that recovers, and the copy of a commit just made did not. Every restore to a moment
// in between left out writes already answered, and nothing said so (1 run in 7 of the review's driver).
// A commit's copy that may meet another connection's commits (its own last copy failed, or another
// connection committed since) reads the answered file too.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readAnswered } from '../../src/history/answered-commits.ts';
import { listGenerations, listSegments, localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { readCommits } from '../../src/history/segment-index.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { integrity, pastMs } from '../helpers/history.ts';
import { fillDisk, removeTmpfsFolder, tmpfsFolder } from '../helpers/tmpfs.ts';

const CHILD = fileURLToPath(new URL('../helpers/answer-first-child.mjs', import.meta.url));

const { mnt, refused } = tmpfsFolder('agentdb-late-other-', '8m', 'history-late-other-child.test.ts');

describe.runIf(!refused)('a commit answered by a killed child, copied by the next owner’s write once room came back', () => {
  let db: DbTarget;
  const caches: HandleCache[] = [];
  const child = () => {
    const history = new HistoryCapture(mnt, { checkpointBytes: 1024 * 1024, retentionDays: 30 });
    const handles = new HandleCache({ size: 4, ...history.hooks() });
    caches.push(handles);
    return { history, handles };
  };
  const commitTimes = () => {
    const gen = listGenerations(localSource(mnt, db.id)).at(-1)!;
    return listSegments(gen)
      .flatMap((s) => readCommits(s.indexPath))
      .map((c) => c.at);
  };
  const rowsAt = (at: number) => {
    const file = path.join(os.tmpdir(), `agentdb-late-other-at-${at}-${Math.random()}.sqlite`);
    try {
      buildRestore(planRestore(localSource(mnt, db.id), { at }), file);
      expect(integrity(file)).toBe('ok');
      const out = new Database(file, { readonly: true });
      try {
        return out.prepare('SELECT v FROM t ORDER BY id').pluck().all() as string[];
      } finally {
        out.close();
      }
    } finally {
      fs.rmSync(file, { force: true });
    }
  };

  beforeAll(() => {
    db = historyTarget(mnt, 'late/a');
    const { handles, history } = child();
    const live = handles.open(db, 'write');
    live.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
    history.run(live, db);
    live.prepare("INSERT INTO t(v) VALUES ('before')").run();
    history.run(live, db);
    handles.closeAll();
  });

  afterAll(() => {
    for (const handles of caches) handles.closeAll();
    removeTmpfsFolder(mnt, refused);
  });

  it('keeps the time the killed child answered it at: a restore to that moment has it', () => {
    // The owning child answers a write and is killed before its copy: its time is in the answered file only.
    const run = spawnSync(process.execPath, [CHILD, JSON.stringify({ dataDir: mnt, db, then: 'kill' })], { encoding: 'utf8' });
    expect(run.signal, run.stderr).toBe('SIGKILL');
    const at = readAnswered(localSource(mnt, db.id))!.at;
    // The disk is full: the next owner opens the database, and its copy on open and its catch-up fail.
    const filler = path.join(mnt, 'filler');
    const full = fillDisk(filler);
    const next = child();
    const live = next.handles.open(db, 'write');
    next.history.catchUp(live, db);
    expect(next.history.behindCause(db.path)).toContain('ENOSPC');
    expect(commitTimes().at(-1)).toBeLessThan(at);
    // Room comes back; the next owner's write commits, and its copy takes the killed child's commit along.
    fs.closeSync(full.fd);
    fs.rmSync(filler);
    pastMs(at + 20);
    live.prepare("INSERT INTO t(v) VALUES ('next')").run();
    next.history.afterCommit(live, db);
    next.history.finishCommitted();
    expect(next.history.behindCause(db.path)).toBeUndefined();
    const times = commitTimes();
    expect(times.at(-2)).toBe(at);
    expect(times.at(-1)).toBeGreaterThan(at + 20);
    expect(rowsAt(at)).toEqual(['before', 'answered first']);
    expect(rowsAt(Date.now())).toEqual(['before', 'answered first', 'next']);
  });
});
