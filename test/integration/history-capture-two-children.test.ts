import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { localSource } from '../../src/history/layout.ts';
import { startGeneration } from '../../src/history/snapshot.ts';
import { buildRestore, planRestore } from '../../src/history/restore-engine.ts';
import { dumpOf, dumpHash, pastMs } from '../helpers/history.ts';

// Hostile review of capture keeping a segment's files open while a handle is: two executor
// children are two copies of the capture module (each its own cached state), each with its own
// handle of one database. One keeps an idle handle while the other snapshots the database.
type Capture = typeof import('../../src/history/capture.ts');
async function child(): Promise<Capture> {
  vi.resetModules();
  return import('../../src/history/capture.ts');
}

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-capture-two-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function open(file: string): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  return db;
}

describe('capture in two children of one database', () => {
  it("sees the other child's snapshot while its own handle stayed open, even with the WAL empty", async () => {
    const file = path.join(dir, 'db.sqlite');
    const source = localSource(dir, 'w/a');
    const opts = { source, checkpointBytes: 1 << 30 };
    const a = await child();
    const b = await child();
    const dbA = open(file);
    dbA.exec('CREATE TABLE t (v)');
    a.capture(dbA, file, opts); // the first generation
    dbA.exec("INSERT INTO t VALUES ('x')");
    a.capture(dbA, file, opts); // a segment, its files now open in child a

    const before = a.capturedPosition(file, source)!;

    // Child b: a nightly snapshot as `snapshotNow` takes it (everything captured, then a new generation).
    const dbB = open(file);
    b.capture(dbB, file, { source, checkpointBytes: 0 });
    const meta = startGeneration(dbB, file, source, 'nightly', Date.now());
    b.forgetCapture(file);

    // Child a, its handle still open: the WAL is empty (truncated by the snapshot), nothing new.
    a.capture(dbA, file, opts);
    const now = a.capturedPosition(file, source)!;
    expect(now.generation).not.toBe(before.generation);
    expect(now).toEqual({ generation: meta.generation, segment: '', frames: 0 });

    // Closing a's handle as the last connection must not seal the generation the snapshot ended.
    dbB.close();
    const pending = a.captureBeforeClose(dbA, file, opts);
    dbA.close();
    expect(pending?.genDir).toBe(path.join(source.generationsDir, meta.generation));
  });

  it("counts for the quota what the other child captured into a new segment, once the second is past", async () => {
    const file = path.join(dir, 'db.sqlite');
    const source = localSource(dir, 'w/a');
    const root = path.dirname(source.generationsDir);
    const opts = { source, checkpointBytes: 1 << 30 };
    const a = await child();
    const b = await child();
    const dbA = open(file);
    dbA.exec('CREATE TABLE t (v)');
    a.capture(dbA, file, opts);
    dbA.exec("INSERT INTO t VALUES ('x')");
    a.capture(dbA, file, opts); // child a: its segment's files open
    const before = a.historyBytes(file, source, root);
    expect(before).toBe(bytesUnder(root));

    // Child b checkpoints (the WAL starts over) and writes a lot: a new segment, a's untouched.
    const dbB = open(file);
    b.capture(dbB, file, { source, checkpointBytes: 0 });
    dbB.prepare('WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) INSERT INTO t SELECT hex(randomblob(4000)) FROM n').run();
    b.capture(dbB, file, opts);
    expect(bytesUnder(root)).toBeGreaterThan(before + 1_000_000);

    // The quota check in child a a second later (the clock moved, nothing else).
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(Date.now() + 2000);
      expect(a.historyBytes(file, source, root)).toBe(bytesUnder(root));
    } finally {
      vi.useRealTimers();
      dbA.close();
      dbB.close();
    }
  });
});

describe('a quota check while another child captures', () => {
  it("does not cut the frames the other child copied before it appended their index line", async () => {
    const file = path.join(dir, 'db.sqlite');
    const source = localSource(dir, 'w/a');
    const root = path.dirname(source.generationsDir);
    const opts = { source, checkpointBytes: 1 << 30 };
    const a = await child();
    const b = await child();
    const dbA = open(file);
    const dbB = open(file);
    dbA.exec('CREATE TABLE t (v)');
    a.capture(dbA, file, opts);
    dbA.exec("INSERT INTO t VALUES ('a')");
    a.capture(dbA, file, opts);
    a.historyBytes(file, source, root);
    dbB.exec("INSERT INTO t VALUES ('b1')");
    b.capture(dbB, file, opts); // a's look at the files is now out of date

    // Child b captures its next commit (closing an idle handle does, under the write lock); child
    // a's line runs the quota check before a write (no lock) just as b has copied the frames and
    // not yet appended their index line.
    dbB.exec("INSERT INTO t VALUES ('b2')");
    const live = dumpOf(dbB);
    const realWrite = fs.writeSync;
    let raced = false;
    const spy = vi.spyOn(fs, 'writeSync').mockImplementation(((fd: number, data: unknown, ...rest: unknown[]) => {
      if (!raced && typeof data === 'string' && data.startsWith('{')) {
        raced = true;
        vi.useFakeTimers({ toFake: ['Date'] });
        vi.setSystemTime(Date.now() + 2000);
        try {
          a.historyBytes(file, source, root);
        } finally {
          vi.useRealTimers();
        }
      }
      return (realWrite as (...args: unknown[]) => number)(fd, data, ...rest);
    }) as typeof fs.writeSync);
    try {
      b.capture(dbB, file, opts);
    } finally {
      spy.mockRestore();
    }
    expect(raced).toBe(true);
    pastMs(Date.now());
    const out = path.join(dir, 'restored.sqlite');
    buildRestore(planRestore(source, { at: Date.now() }), out);
    expect(dumpHash(out)).toBe(live);
    dbA.close();
    dbB.close();
  });
});

function bytesUnder(d: string): number {
  let n = 0;
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    const p = path.join(d, e.name);
    n += e.isDirectory() ? bytesUnder(p) : fs.statSync(p).size;
  }
  return n;
}
