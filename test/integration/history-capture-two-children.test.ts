import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { localSource } from '../../src/history/history-files.ts';
import { startGeneration } from '../../src/history/snapshot.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { dumpOf, dumpHash, pastMs, prng } from '../helpers/history.ts';

// Hostile review of capture keeping a segment's files open while a handle is: two executor
// children are two copies of the capture module (each its own cached state), each with its own
// handle of one database. One keeps an idle handle while the other snapshots the database.
type Capture = typeof import('../../src/history/capture.ts') &
  typeof import('../../src/history/capture-on-close.ts') &
  typeof import('../../src/history/history-bytes.ts');
async function child(): Promise<Capture> {
  vi.resetModules();
  // Imported after one reset, the two share the child's own capture state.
  return {
    ...(await import('../../src/history/capture.ts')),
    ...(await import('../../src/history/capture-on-close.ts')),
    ...(await import('../../src/history/history-bytes.ts')),
  };
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

/** A database's file and history in the test's folder, and two children to capture it. */
async function twoChildren() {
  const file = path.join(dir, 'db.sqlite');
  const source = localSource(dir, 'w/a');
  return { file, source, opts: { source, checkpointBytes: 1 << 30 }, a: await child(), b: await child() };
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

  it('counts for the quota what the other child captured into a new segment, once the second is past', async () => {
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

describe('the other child capturing into the same segment', () => {
  it('is seen by its next capture: the segment and its index hold each commit once, and every moment restores', async () => {
    const { file, source, opts, a, b } = await twoChildren();
    const dbA = open(file);
    const dbB = open(file);
    dbA.exec('CREATE TABLE t (v)');
    a.capture(dbA, file, opts);
    const moments: { at: number; hash: string }[] = [];
    const commit = (db: Database.Database, c: Capture, v: string) => {
      db.prepare('INSERT INTO t VALUES (?)').run(v);
      c.capture(db, file, opts);
      const at = Date.now();
      pastMs(at);
      moments.push({ at, hash: dumpOf(db) });
    };
    // Child a's segment files stay open throughout; child b appends to the same segment between
    // a's commits (the WAL never starts over, so only the index's length can tell a).
    commit(dbA, a, 'a1');
    commit(dbB, b, 'b1');
    commit(dbB, b, 'b2');
    commit(dbA, a, 'a2');
    commit(dbB, b, 'b3');
    commit(dbA, a, 'a3');
    expect(a.capturedPosition(file, source)).toEqual(b.capturedPosition(file, source));
    const seg = fs.readdirSync(path.join(source.generationsDir, a.capturedPosition(file, source)!.generation, 'segments')).find((n) => n.endsWith('.idx'));
    expect(seg).toBeDefined();
    const index = fs
      .readFileSync(path.join(source.generationsDir, a.capturedPosition(file, source)!.generation, 'segments', seg!), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { frames: number });
    expect(index.length).toBe(6);
    for (let i = 1; i < index.length; i++) expect(index[i]!.frames).toBeGreaterThan(index[i - 1]!.frames);
    for (const m of moments) {
      const out = path.join(dir, `at-${m.at}.sqlite`);
      buildRestore(planRestore(source, { at: m.at }), out);
      expect(dumpHash(out)).toBe(m.hash);
    }
    dbA.close();
    dbB.close();
  });
});

describe('a quota check while another child captures', () => {
  it('does not cut the frames the other child copied before it appended their index line', async () => {
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

describe('a child killed between copy and index line', () => {
  it('leaves frames the other child, its handle open all along, copies again exactly', async () => {
    const file = path.join(dir, 'db.sqlite');
    const source = localSource(dir, 'w/a');
    const opts = { source, checkpointBytes: 1 << 30 };
    const a = await child();
    const b = await child();
    const dbA = open(file);
    dbA.exec('CREATE TABLE t (v)');
    a.capture(dbA, file, opts);
    dbA.exec("INSERT INTO t VALUES ('a1')");
    a.capture(dbA, file, opts); // a's segment files open
    const dbB = open(file);
    b.capture(dbB, file, opts);
    dbB.exec('INSERT INTO t VALUES (hex(randomblob(20000)))');
    // b dies as it would append the index line: its frames are in the segment, unindexed.
    const realWrite = fs.writeSync;
    const spy = vi.spyOn(fs, 'writeSync').mockImplementation(((fd: number, data: unknown, ...rest: unknown[]) => {
      if (typeof data === 'string' && data.startsWith('{')) throw new Error('killed');
      return (realWrite as (...args: unknown[]) => number)(fd, data, ...rest);
    }) as typeof fs.writeSync);
    try {
      expect(() => b.capture(dbB, file, opts)).toThrow('killed');
    } finally {
      spy.mockRestore();
    }
    dbB.close(); // not the last connection: no checkpoint, as when the process is killed
    dbA.exec("INSERT INTO t VALUES ('a2')");
    a.capture(dbA, file, opts);
    pastMs(Date.now());
    const live = dumpOf(dbA);
    const out = path.join(dir, 'restored.sqlite');
    buildRestore(planRestore(source, { at: Date.now() }), out);
    expect(dumpHash(out)).toBe(live);
    dbA.close();
  });
});

describe('two children taking turns at one database, randomized', () => {
  for (const seed of [1, 2, 3]) {
    it(`restores every moment to what the database held then (seed ${seed})`, async () => {
      const file = path.join(dir, 'db.sqlite');
      const source = localSource(dir, 'w/a');
      const root = path.dirname(source.generationsDir);
      const opts = { source, checkpointBytes: 24 * 1024 };
      const rnd = prng(seed);
      const kids = [await child(), await child()];
      const dbs: (Database.Database | undefined)[] = [undefined, undefined];
      const handle = (i: number) => {
        if (!dbs[i]) {
          dbs[i] = open(file);
          kids[i]!.capture(dbs[i]!, file, opts);
        }
        return dbs[i]!;
      };
      handle(0).exec('CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)');
      kids[0]!.capture(dbs[0]!, file, opts);
      const moments: { at: number; dump: string }[] = [];
      for (let step = 0; step < 150; step++) {
        const i = rnd() < 0.5 ? 0 : 1;
        const k = kids[i]!;
        const r = rnd();
        if (r < 0.55) {
          const db = handle(i);
          if (rnd() < 0.2) db.exec('DELETE FROM t WHERE k % 3 = 0');
          else db.prepare('INSERT INTO t(v) VALUES (hex(randomblob(?)))').run(200 + Math.floor(rnd() * 3000));
          k.capture(db, file, opts);
          pastMs(Date.now());
          moments.push({ at: Date.now(), dump: dumpOf(db) });
          pastMs(Date.now());
        } else if (r < 0.65) {
          const db = handle(i);
          k.capture(db, file, { source, checkpointBytes: 0 });
          startGeneration(db, file, source, 'manual', Date.now());
          k.forgetCapture(file);
        } else if (r < 0.8) {
          k.historyBytes(file, source, root);
          k.capturedPosition(file, source);
        } else if (dbs[i]) {
          const pending = k.captureBeforeClose(dbs[i]!, file, opts);
          dbs[i]!.close();
          dbs[i] = undefined;
          k.sealAfterClose(file, pending);
        }
      }
      const bad: string[] = [];
      for (const [n, m] of moments.entries()) {
        const out = path.join(dir, `r${n}.sqlite`);
        try {
          buildRestore(planRestore(source, { at: m.at }), out);
          if (dumpHash(out) !== m.dump) bad.push(`moment ${n}: differs`);
        } catch (err) {
          bad.push(`moment ${n}: ${(err as Error).message}`);
        } finally {
          fs.rmSync(out, { force: true });
        }
      }
      for (const db of dbs) db?.close();
      expect(bad.slice(0, 5)).toEqual([]);
    }, 120_000);
  }
});

function bytesUnder(d: string): number {
  let n = 0;
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    const p = path.join(d, e.name);
    n += e.isDirectory() ? bytesUnder(p) : fs.statSync(p).size;
  }
  return n;
}
