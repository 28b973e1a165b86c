// A write is answered before its frames are copied into history: the child takes the write lock
// right after the commit, answers, then copies (`HistoryCapture.afterCommit`). What must hold
// anyway: nothing commits or starts the WAL over in between, whoever reads history for a restore
// or a fork waits for the copy, and a child killed in between loses neither the commit nor the
// time it was answered at.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readAnswered } from '../../src/history/answered-commits.ts';
import { listGenerations, listSegments, localSource } from '../../src/history/history-files.ts';
import { readCommits } from '../../src/history/segment-index.ts';
import { finishCapture, lockForCapture } from '../../src/history/capture.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { restoreInto } from '../../src/history/restore-into.ts';
import { historyPool, historyTarget, mustRun } from '../helpers/history-pool.ts';
import { dumpHash, integrity, pastMs } from '../helpers/history.ts';

const CHILD = fileURLToPath(new URL('../helpers/answer-first-child.mjs', import.meta.url));
const by = { who: 'operator:test', via: 'operator' as const };

let dataDir: string;
let db: DbTarget;
let opened: HandleCache[] = [];

/** A handle cache with capture, as an executor child has (this process plays one). */
function child(): { handles: HandleCache; history: HistoryCapture } {
  const history = new HistoryCapture(dataDir, { checkpointBytes: 1024 * 1024, retentionDays: 30 });
  const handles = new HandleCache({ size: 4, ...history.hooks() });
  opened.push(handles);
  return { handles, history };
}

const lastCommit = () => {
  const gen = listGenerations(localSource(dataDir, db.id)).at(-1)!;
  return listSegments(gen)
    .flatMap((s) => readCommits(s.indexPath))
    .at(-1);
};
// The newest record of the answered file (it keeps several, in turn: issue 25).
const answeredAt = () => readAnswered(localSource(dataDir, db.id))!.at;
const rowsAt = (at: number) => {
  const file = path.join(dataDir, `at-${at}-${Math.random()}.sqlite`);
  buildRestore(planRestore(localSource(dataDir, db.id), { at }), file);
  expect(integrity(file)).toBe('ok');
  const out = new Database(file, { readonly: true });
  try {
    return out.prepare('SELECT v FROM t ORDER BY id').pluck().all() as string[];
  } finally {
    out.close();
  }
};

beforeEach(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-answer-first-'));
  db = historyTarget(dataDir, 'af/a');
  // History begun, one row in, every handle closed (the WAL folded in and sealed).
  const { handles, history } = child();
  const live = handles.open(db, 'write');
  live.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
  history.run(live, db);
  live.prepare("INSERT INTO t(v) VALUES ('before')").run();
  history.run(live, db);
  handles.closeAll();
});

afterEach(() => {
  for (const handles of opened) handles.closeAll();
  opened = [];
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/**
 * Another child (this process) with the database open, checkpointing after every copy, writes
 * a row; then a child writes one, which starts the WAL over, answers it and is killed before
 * its copy. Answers this process's pieces, the generations then, and when the write was answered.
 */
function killedAfterWalRestart() {
  const history = new HistoryCapture(dataDir, { checkpointBytes: 1, retentionDays: 30 });
  const handles = new HandleCache({ size: 4, ...history.hooks() });
  opened.push(handles);
  const live = handles.open(db, 'write');
  live.prepare("INSERT INTO t(v) VALUES ('x')").run();
  history.run(live, db);
  const gens = listGenerations(localSource(dataDir, db.id)).length;
  const run = spawnSync(process.execPath, [CHILD, JSON.stringify({ dataDir, db, then: 'kill' })], { encoding: 'utf8' });
  expect(run.signal, run.stderr).toBe('SIGKILL');
  const at = answeredAt();
  pastMs(at + 20);
  return { history, handles, live, gens, at };
}

describe('a write answered before its copy', () => {
  it('killed between the answer and the copy: the next open copies the commit, with the time it was answered at', () => {
    const gens = listGenerations(localSource(dataDir, db.id)).length;
    const run = spawnSync(process.execPath, [CHILD, JSON.stringify({ dataDir, db, then: 'kill' })], { encoding: 'utf8' });
    expect(run.signal, run.stderr).toBe('SIGKILL');
    expect(run.stdout).toBe('answered\n');
    const at = answeredAt();
    expect(lastCommit()!.at).toBeLessThan(at);
    // Long enough after that an open stamping the commit with its own time would show.
    pastMs(at + 20);
    const { handles } = child();
    handles.open(db, 'read');
    expect(lastCommit()!.at).toBe(at);
    expect(listGenerations(localSource(dataDir, db.id))).toHaveLength(gens);
    expect(rowsAt(at)).toEqual(['before', 'answered first']);
    expect(rowsAt(at - 1)).toEqual(['before']);
  });

  it("killed before the copy of a database's first write (its generation has no segment yet): copied with the time it was answered at", () => {
    db = historyTarget(dataDir, 'af/fresh');
    const sql = "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t(v) VALUES ('answered first')";
    const run = spawnSync(process.execPath, [CHILD, JSON.stringify({ dataDir, db, then: 'kill', sql })], { encoding: 'utf8' });
    expect(run.signal, run.stderr).toBe('SIGKILL');
    const at = answeredAt();
    pastMs(at + 20);
    child().handles.open(db, 'read');
    expect(lastCommit()!.at).toBe(at);
    expect(rowsAt(at)).toEqual(['answered first']);
  });

  it('killed before the copy, with an earlier commit nothing copied: both are copied with the time the later was answered at', () => {
    const run = spawnSync(process.execPath, [CHILD, JSON.stringify({ dataDir, db, then: 'kill', uncopied: "INSERT INTO t(v) VALUES ('uncopied')" })], {
      encoding: 'utf8',
    });
    expect(run.signal, run.stderr).toBe('SIGKILL');
    const at = answeredAt();
    pastMs(at + 20);
    child().handles.open(db, 'read');
    const gen = listGenerations(localSource(dataDir, db.id)).at(-1)!;
    const times = listSegments(gen)
      .flatMap((s) => readCommits(s.indexPath))
      .map((c) => c.at);
    expect(times.slice(-2)).toEqual([at, at]);
    expect(rowsAt(at)).toEqual(['before', 'uncopied', 'answered first']);
  });

  it('killed before the copy, then another child that has the database open writes next: the killed write keeps the time it was answered at', () => {
    // This process plays the other child: its handle open before, so no copy runs as it opens.
    const other = child();
    const live = other.handles.open(db, 'write');
    // Its own write first, so the killed one goes on in the same WAL (a WAL started over by another
    // connection's commit is a gap to a child that did not copy it: see docs/history.md).
    live.prepare("INSERT INTO t(v) VALUES ('mine')").run();
    other.history.run(live, db);
    const run = spawnSync(process.execPath, [CHILD, JSON.stringify({ dataDir, db, then: 'kill' })], { encoding: 'utf8' });
    expect(run.signal, run.stderr).toBe('SIGKILL');
    const at = answeredAt();
    pastMs(at + 20);
    live.prepare("INSERT INTO t(v) VALUES ('next')").run();
    other.history.afterCommit(live, db);
    other.history.finishCommitted();
    const gen = listGenerations(localSource(dataDir, db.id)).at(-1)!;
    const times = listSegments(gen)
      .flatMap((s) => readCommits(s.indexPath))
      .map((c) => c.at);
    expect(times.at(-2)).toBe(at);
    expect(times.at(-1)).toBeGreaterThan(at + 20);
    expect(rowsAt(at)).toEqual(['before', 'mine', 'answered first']);
  });

  it('killed before the copy of a write that started the WAL over, then another child closes its handle: no gap, and the write keeps its time', () => {
    const { handles, gens, at } = killedAfterWalRestart();
    handles.closeAll();
    expect(listGenerations(localSource(dataDir, db.id))).toHaveLength(gens);
    expect(lastCommit()!.at).toBe(at);
    expect(rowsAt(at)).toEqual(['before', 'x', 'answered first']);
  });

  it('killed before the copy of a write that started the WAL over, then another child that has the database open writes next: no gap, and the write keeps its time', () => {
    // Its next write finds the WAL begun anew with history unmoved since its own last capture,
    // which an outside program's commit + checkpoint + commit looks like too. The WAL index's
    // count of commits tells them apart: every commit since is in the new WAL.
    const { history, live, gens, at } = killedAfterWalRestart();
    live.prepare("INSERT INTO t(v) VALUES ('next')").run();
    history.afterCommit(live, db);
    history.finishCommitted();
    expect(listGenerations(localSource(dataDir, db.id))).toHaveLength(gens);
    const gen = listGenerations(localSource(dataDir, db.id)).at(-1)!;
    const times = listSegments(gen)
      .flatMap((s) => readCommits(s.indexPath))
      .map((c) => c.at);
    expect(times.at(-2)).toBe(at);
    expect(times.at(-1)).toBeGreaterThan(at + 20);
    expect(rowsAt(at)).toEqual(['before', 'x', 'answered first']);
    expect(rowsAt(Date.now())).toEqual(['before', 'x', 'answered first', 'next']);
  });

  it("takes a commit's time once it holds the write lock: no other commit can land after that time and before the copy", () => {
    const { handles } = child();
    const live = handles.open(db, 'write');
    const outside = new Database(db.path, { timeout: 0 });
    try {
      live.prepare("INSERT INTO t(v) VALUES ('mine')").run();
      let tried = false;
      const now = () => {
        // Asked for the time, the capture already holds the lock: another connection's commit must wait.
        expect(() => outside.prepare("INSERT INTO t(v) VALUES ('outside')").run()).toThrow(/locked|busy/i);
        tried = true;
        return Date.now();
      };
      finishCapture(lockForCapture(live, db.path, { source: localSource(dataDir, db.id), checkpointBytes: 1024 * 1024, now }, true));
      expect(tried).toBe(true);
    } finally {
      outside.close();
    }
  });

  it('held between the answer and the copy: nothing commits, and a fork taken then waits for the copy', async () => {
    const proc = spawn(process.execPath, [CHILD, JSON.stringify({ dataDir, db, then: 'hold', holdMs: 500 })], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<number | null>((resolve) => proc.on('exit', resolve));
    let out = '';
    await new Promise<void>((resolve, reject) => {
      proc.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('answered\n')) resolve();
      });
      proc.on('exit', () => reject(new Error(`the child ended before answering: ${out}`)));
    });
    const at = answeredAt();
    // Another program's commit cannot land between the answer and the copy.
    const outside = new Database(db.path, { timeout: 0 });
    try {
      expect(() => outside.exec('BEGIN IMMEDIATE')).toThrow(/locked|busy/i);
    } finally {
      outside.close();
    }
    // A fork as of now, from this process (another child): it waits for the copy, and has the row.
    const fork = historyTarget(dataDir, 'af/fork');
    const { handles, history } = child();
    restoreInto(handles, history, dataDir, { op: 'restoreInto', db: fork, source: db.id, from: db, at: Date.now(), by });
    const forked = new Database(fork.path, { readonly: true });
    try {
      expect(forked.prepare('SELECT v FROM t ORDER BY id').pluck().all()).toEqual(['before', 'answered first']);
    } finally {
      forked.close();
    }
    expect(await exited).toBe(0);
    expect(out).toBe('answered\ncopied\n');
    expect(lastCommit()!.at).toBe(at);
  });

  it('an outside checkpoint that would start the WAL over waits for the copy: the answered commit is in history, at its time', async () => {
    const proc = spawn(process.execPath, [CHILD, JSON.stringify({ dataDir, db, then: 'hold', holdMs: 300 })], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<number | null>((resolve) => proc.on('exit', resolve));
    await new Promise<void>((resolve) => proc.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('answered') && resolve()));
    const outside = new Database(db.path, { timeout: 10_000 });
    try {
      const [res] = outside.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
      expect(res!.busy).toBe(0);
      expect(fs.statSync(`${db.path}-wal`).size).toBe(0);
    } finally {
      outside.close();
    }
    expect(await exited).toBe(0);
    const at = answeredAt();
    expect(lastCommit()!.at).toBe(at);
    expect(rowsAt(at)).toEqual(['before', 'answered first']);
    expect(rowsAt(at - 1)).toEqual(['before']);
  });
});

describe('through the executor pool', () => {
  it('a fork as of the moment a write is answered has that write, from whichever child runs it', async () => {
    const pool = await historyPool(dataDir, { handleCacheSize: 4, checkpointBytes: 1024 * 1024, settle: false });
    try {
      for (let i = 0; i < 20; i++) {
        await mustRun(pool, { op: 'write', db, sql: 'INSERT INTO t(v) VALUES (?)', params: [`w${i}`], callKey: `k${i}` });
        const fork = historyTarget(dataDir, `af/f${i}`);
        await mustRun(pool, { op: 'restoreInto', db: fork, source: db.id, from: db, at: Date.now(), by, timeoutMs: 60_000 });
        expect(dumpHash(fork.path, { withoutAudit: true })).toBe(dumpHash(db.path, { withoutAudit: true }));
      }
      // After `capture`, history holds every answered write: the files say so directly.
      await mustRun(pool, { op: 'write', db, sql: "INSERT INTO t(v) VALUES ('last')", params: [], callKey: 'klast' });
      await mustRun(pool, { op: 'capture', db });
      expect(rowsAt(Date.now()).at(-1)).toBe('last');
    } finally {
      await pool.stop();
    }
  });
});
