import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { capturedPosition, forgetCapture } from '../../src/history/capture.ts';
import { listGenerations, listSegments, localSource } from '../../src/history/history-files.ts';
import { readCommits } from '../../src/history/segment-index.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { databasePath } from '../../src/contracts/database-id.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { dumpHash } from '../helpers/history.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function setup() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-torn-'));
  dirs.push(dataDir);
  const history = new HistoryCapture(dataDir, { checkpointBytes: 64 * 1024 * 1024, retentionDays: 30 });
  const handles = new HandleCache({ size: 4, ...history.hooks() });
  const db: DbTarget = { id: 'torn/a', path: databasePath(dataDir, 'torn', 'a', 0), shard: 0, limits: PLAN_LIMITS.enterprise };
  const write = (sql: string, params: unknown[] = []) => {
    const h = handles.open(db, 'write');
    h.prepare(sql).run(...params);
    history.run(h, db);
  };
  const currentIndex = () => {
    const gen = listGenerations(localSource(dataDir, db.id)).at(-1)!;
    return listSegments(gen).at(-1)!.indexPath;
  };
  return { dataDir, handles, db, write, currentIndex };
}

/**
 * Five commits, a torn line appended to the index (a capture died mid-append; the WAL, not
 * checkpointed, goes on), `before` run by whatever comes next, then five more commits: all ten
 * must be in the index and restorable.
 */
function tornThenWrite(torn: string, before: (dataDir: string, db: DbTarget) => void = () => undefined): void {
  const { dataDir, handles, db, write, currentIndex } = setup();
  try {
    write('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    for (let i = 0; i < 5; i++) write('INSERT INTO t (v) VALUES (?)', [`before ${i}`]);
    const index = currentIndex();
    const was = readCommits(index).length;
    fs.appendFileSync(index, torn);
    // The capture that comes next knows nothing of the last one.
    forgetCapture(db.path);
    before(dataDir, db);
    for (let i = 0; i < 5; i++) write('INSERT INTO t (v) VALUES (?)', [`after ${i}`]);
    expect(currentIndex()).toBe(index);
    expect(readCommits(index).length).toBe(was + 5);
    handles.closeAll();
    const out = path.join(dataDir, 'restored.sqlite');
    buildRestore(planRestore(localSource(dataDir, db.id), { at: Date.now() }), out);
    expect(dumpHash(out)).toBe(dumpHash(db.path));
  } finally {
    handles.closeAll();
  }
}

describe('a history index line cut short (a crash or a full disk mid-append)', () => {
  // A whole line without its newline is no torn tail: a commit when it reads back, damage when
  // not (history-index-damage.test.ts).
  it('hides no commit captured after it (cut mid-line)', () => tornThenWrite('{"at":17'));

  it('hides no commit when the torn tail was first seen by a look without the lock (a restore, a snapshot, a quota check)', () =>
    // Something that looks at the files without the write lock comes first: it caches what it
    // saw, torn tail included, and the capture under the lock that follows trusts that cache.
    tornThenWrite('{"at":17', (dataDir, db) => void capturedPosition(db.path, localSource(dataDir, db.id))));
});
