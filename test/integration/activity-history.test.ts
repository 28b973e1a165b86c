import Database from 'better-sqlite3';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ActivityHistory } from '../../src/history/activity-history.ts';
import type { ActivityRows } from '../../src/history/activity-rows.ts';
import { capture } from '../../src/history/capture.ts';
import { localSource } from '../../src/history/history-files.ts';
import { activitySince, readActivity, recordCallActivity, type ActivityRow } from '../../src/sqlite/sqlite-activity.ts';

// A database's kept history (review H29-4) on real capture and SQLite, in this process: a read
// that fails halfway leaves nothing half-read behind; the next one is as a fresh read. Small
// checkpoints (64 KB), so the WAL starts over and history spans segments.

const ID = 'w/kept';
let dir: string;
let db: Database.Database;
let file: string;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-activity-history-'));
  file = path.join(dir, 'kept.sqlite');
  db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  capture(db, file, { source: localSource(dir, ID), checkpointBytes: 64 * 1024 });
  db.exec('CREATE TABLE t (v TEXT)');
});

afterEach(() => {
  db.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** `n` calls, each captured unless `uncaptured` (committed, its row read before capture copies it). */
const calls = (n: number, uncaptured = false) => {
  const insert = db.prepare('INSERT INTO t VALUES (?)');
  for (let i = 0; i < n; i++) {
    db.transaction(() => {
      insert.run(`v${i}`);
      recordCallActivity(db, { tool: 'DATA_WRITE_SQL', by: 'agent:a', callId: `c${i}`, statement: 'INSERT' }, 1);
    })();
    if (!uncaptured) capture(db, file, { source: localSource(dir, ID), checkpointBytes: 64 * 1024 });
  }
};

const rows = (fail = false): ActivityRows => ({
  all: async () => readActivity(db) as Pick<ActivityRow, 'seq' | 'kind' | 'at'>[],
  some: async (seqs) => readActivity(db, seqs) as ActivityRow[],
  since: async (after) => {
    if (fail) throw new Error('the executor failed');
    return activitySince(db, after);
  },
});

const view = (h: ActivityHistory) => ({ commits: h.commits, match: [...h.matcher.byCommit], rows: h.order.map((r) => r.seq) });

describe('ActivityHistory', () => {
  it('reads everything again after a read that failed halfway, and then equals a fresh read', async () => {
    calls(10);
    // A row read before its commit is in history waits for it (the match goes past every commit).
    calls(1, true);
    const kept = new ActivityHistory(dir, ID);
    await kept.refresh(rows());
    calls(5);
    await expect(kept.refresh(rows(true))).rejects.toThrow('the executor failed');
    calls(3);
    await kept.refresh(rows());
    const fresh = new ActivityHistory(dir, ID);
    await fresh.refresh(rows());
    expect(view(kept)).toEqual(view(fresh));
    expect(kept.matcher.byCommit.filter((r) => r !== undefined)).toHaveLength(19);
  });

  it('goes on from where it was: the same as a fresh read after each of many small steps', async () => {
    const kept = new ActivityHistory(dir, ID);
    for (let step = 0; step < 12; step++) {
      calls(step % 4, step % 3 === 1);
      await kept.refresh(rows());
      const fresh = new ActivityHistory(dir, ID);
      await fresh.refresh(rows());
      expect(view(kept), `step ${step}`).toEqual(view(fresh));
    }
  });
});
