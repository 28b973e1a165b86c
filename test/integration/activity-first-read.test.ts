import type Database from 'better-sqlite3';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ActivityCache } from '../../src/history/activity-cache.ts';
import { ActivityHistory } from '../../src/history/activity-history.ts';
import type { ActivityRows } from '../../src/history/activity-rows.ts';
import { activityPage } from '../../src/history/activity-view.ts';
import { activitySince, readActivity, type ActivityRow } from '../../src/sqlite/sqlite-activity.ts';
import { buildActivity } from '../helpers/activity-build.ts';

// Issue 29: a first page reads the whole retained history on the shard worker's thread. It must
// give the event loop back as it goes (the worker's other databases wait on it), and a history
// too long to keep must neither be kept whole nor read past its limit.
const ID = 'first/read';
const COMMITS = 3_000;
let dataDir: string;
let db: Database.Database;

/** The rows as the executor answers them: each a later turn, as a message from the child is. */
const rows = (): ActivityRows => ({
  all: async () => readActivity(db) as Pick<ActivityRow, 'seq' | 'kind' | 'at'>[],
  some: async (seqs) => readActivity(db, seqs) as ActivityRow[],
  since: async (after, limit) => activitySince(db, after, limit),
});

beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-activity-first-'));
  db = buildActivity(dataDir, path.join(dataDir, 'db.sqlite'), COMMITS, ID);
});
afterAll(() => {
  db.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('a first activity page of a long history', () => {
  it('lets a timer set before it fire before it answers (it yields while it reads and matches)', async () => {
    // The rows here are read synchronously (no message between): without the page's own yields
    // nothing else would run until it answered. A turn of 0 ms yields at every piece.
    const history = new ActivityHistory(dataDir, ID, { turnMs: 0 });
    let fired = false;
    const timer = setTimeout(() => (fired = true), 0);
    const refreshed = history.refresh(rows()).then(() => fired);
    expect(await refreshed).toBe(true);
    clearTimeout(timer);
    expect(history.commits.length).toBeGreaterThanOrEqual(COMMITS);
    // What it matched in pieces is what one pass gives: every call's commit has its row.
    expect(history.matcher.byCommit.filter((r) => r !== undefined).length).toBe(COMMITS);
  });

  it('reports what it read afresh: the whole history first, what changed since on the next page', async () => {
    const cache = new ActivityCache();
    const read: number[] = [];
    for (let p = 0; p < 2; p++) await activityPage(dataDir, ID, rows(), { limit: 5, onRead: (n) => read.push(n) }, Date.now(), cache);
    expect(read[0]).toBeGreaterThanOrEqual(2 * COMMITS);
    expect(read[1]).toBe(0);
  });

  it('refuses a history past its read limit with RESOURCE_LIMIT, and keeps nothing of it', async () => {
    const history = new ActivityHistory(dataDir, ID, { readLimit: 1_000 });
    await expect(history.refresh(rows())).rejects.toMatchObject({ code: 'RESOURCE_LIMIT' });
    expect(history.commits.length).toBe(0);
    // Asked again, it refuses at once without reading the history again (review R29b M2: each
    // refused page read up to the limit anew, seconds of the worker's time for a tenth of a call).
    const before = { ...history.reads };
    await expect(history.refresh(rows())).rejects.toMatchObject({ code: 'RESOURCE_LIMIT' });
    expect(history.reads).toEqual(before);
  });

  it('keeps a history larger than the cache holds only while no other database is listed', async () => {
    const cache = new ActivityCache({ databases: 4, items: 1_000 });
    const seen: ActivityHistory[] = [];
    const list = (id: string) => cache.with(dataDir, id, async (h) => seen.push(h) && h.refresh(rows()));
    await list(ID);
    await list(ID);
    expect(seen[1]).toBe(seen[0]);
    // Another database listed (its history empty here): the large one is dropped first.
    await cache.with(dataDir, 'first/other', async () => undefined);
    await list(ID);
    expect(seen[2]).not.toBe(seen[0]);
  });
});
