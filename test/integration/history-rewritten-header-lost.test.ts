// A WAL written again under the salts of the segment copying it, with another header (another
// checkpoint count, so another checksum) and other frames, while the segment already holds
// commits: SQLite itself writes frame 1 again under the same salts only with nothing committed
// under them (history-rewritten-header.test.ts), so this is the WAL replaced behind capture's
// back, by a program outside agentdb. History cannot go on from the segment: a gap. Whether
// commits were lost with the old frames is told by the answered record (`answered.json`): a
// commit answered under those salts past what the segment holds (its child killed between the
// answer and the copy) is gone, and the gap is marked lost (`copy-new.ts`, `answeredPast`);
// without one, nothing agentdb answered is missing, and the stretch restores the last state
// history holds.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { codeOf } from '../../src/errors.ts';
import { capture, finishCapture, forgetCapture, lockForCapture, type CaptureOptions } from '../../src/history/capture.ts';
import { closeWal, endCapture } from '../../src/history/capture-connection.ts';
import { listGenerations, listSegments, localSource } from '../../src/history/history-files.ts';
import { historyView } from '../../src/history/history-view.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { parseWalHeader, WAL_HEADER_BYTES } from '../../src/history/wal-format.ts';
import { writeWal } from '../../src/history/wal-writer.ts';
import { dumpHash, integrity } from '../helpers/history.ts';

const ID = 'rl/a';
let dataDir: string;
let file: string;
let clock: number;
let opts: CaptureOptions;
/** Each moment history was asked about, and the dump of the live file then. */
let moments: { at: number; hash: string }[];

beforeEach(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-rewritten-header-lost-'));
  file = path.join(dataDir, 'db.sqlite');
  // A fixed clock: the moments compared below are exact, and no two commits share a millisecond.
  clock = Date.parse('2026-11-01T00:00:00Z');
  opts = { source: localSource(dataDir, ID), checkpointBytes: 64 * 1024 * 1024, now: () => clock };
  moments = [];
});

afterEach(() => {
  forgetCapture(file);
  fs.rmSync(dataDir, { recursive: true, force: true });
});

function open(): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  return db;
}

/** A write as the executor answers one: its time taken and noted under the write lock, then copied. */
function write(db: Database.Database, v: string): number {
  db.prepare('INSERT INTO t (v) VALUES (?)').run(v);
  clock += 1_000;
  finishCapture(lockForCapture(db, file, opts, true));
  moments.push({ at: clock, hash: dumpHash(file) });
  return clock;
}

function restoredHash(at: number): string {
  const out = path.join(dataDir, `restored-${at}-${Math.random()}.sqlite`);
  buildRestore(planRestore(opts.source, { at }), out);
  expect(integrity(out)).toBe('ok');
  return dumpHash(out);
}

function refusal(at: number): string | undefined {
  try {
    planRestore(opts.source, { at });
    return undefined;
  } catch (err) {
    return codeOf(err);
  }
}

/**
 * Builds the case: a generation whose last segment holds commits under a WAL header with a checkpoint
 * count above 0; with `answeredPast`, one more commit answered and its child killed before its copy.
 * Then the WAL is replaced, with no connection open, by one under the same salts but checkpoint
 * count 0 (so another header checksum) holding, as one commit, the database as history last held
 * it: the answered commit, folded into the file by the close, is written over and gone. Reopened,
 * the first capture finds it. Answers the time of the last commit history holds.
 */
function rewriteBehindCapture(answeredPast: boolean): number {
  const a = open();
  capture(a, file, opts);
  a.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  write(a, 'one');
  // Every frame copied: checkpointed, so the next commit starts the WAL over (its checkpoint count up by one).
  a.pragma('wal_checkpoint(RESTART)');
  write(a, 'two');
  const lastKept = write(a, 'three');
  const head = Buffer.alloc(WAL_HEADER_BYTES);
  const walFd = fs.openSync(`${file}-wal`, 'r');
  fs.readSync(walFd, head, 0, WAL_HEADER_BYTES, 0);
  fs.closeSync(walFd);
  const hdr = parseWalHeader(head)!;
  // Its checkpoint count: not the 0 the WAL written below has.
  expect(head.readUInt32BE(12)).not.toBe(0);
  if (answeredPast) {
    a.prepare('INSERT INTO t (v) VALUES (?)').run('answered, never copied');
    clock += 1_000;
    // Answered (its time noted in answered.json), then the child died before its copy.
    const locked = lockForCapture(a, file, opts, true);
    expect(locked.noted).toMatchObject({ salt1: hdr.salt1, salt2: hdr.salt2 });
    endCapture(a, locked.lock);
  }
  closeWal(a);
  a.close();
  forgetCapture(file);
  // The database as history last held it, as one commit under the old salts and checkpoint count 0.
  const kept = path.join(dataDir, 'kept.sqlite');
  buildRestore(planRestore(opts.source, { at: lastKept }), kept);
  const keptFd = fs.openSync(kept, 'r');
  const pageSize = hdr.pageSize;
  const pages = fs.fstatSync(keptFd).size / pageSize;
  const salts = head.subarray(16, 24);
  const fd = fs.openSync(`${file}-wal`, 'w');
  const wrote = writeWal(
    fd,
    pageSize,
    Array.from({ length: pages }, (_, i) => i + 1),
    pages,
    salts,
    (pgno, into) => void fs.readSync(keptFd, into, 0, pageSize, (pgno - 1) * pageSize),
  );
  fs.closeSync(fd);
  fs.closeSync(keptFd);
  expect(wrote.header).toMatchObject({ salt1: hdr.salt1, salt2: hdr.salt2 });
  expect([wrote.header.c1, wrote.header.c2]).not.toEqual([hdr.c1, hdr.c2]);
  fs.rmSync(`${file}-shm`, { force: true });
  const segments = listSegments(listGenerations(opts.source).at(-1)!);
  expect(segments.at(-1)!.name).not.toBe(segments[0]!.name);
  return lastKept;
}

/** Reopens the database (a new child), captures, writes once more; answers the gap's generation. */
function reopenAndGoOn() {
  const b = open();
  clock += 1_000;
  const report = capture(b, file, opts);
  expect(report.generation).toBe('gap');
  const gap = listGenerations(opts.source).at(-1)!;
  moments.push({ at: gap.snapshot!.at, hash: dumpHash(file) });
  write(b, 'after');
  closeWal(b);
  b.close();
  return gap;
}

describe('a WAL written again under its segment’s salts with another header', () => {
  it('with a commit answered past what the segment holds: the gap is lost, its stretch refused, every other moment exact', () => {
    const lastKept = rewriteBehindCapture(true);
    const answeredAt = lastKept + 1_000;
    const gap = reopenAndGoOn();
    expect(listGenerations(opts.source).map((g) => g.snapshot?.reason)).toEqual(['first', 'gap']);
    expect(gap.snapshot).toMatchObject({ reason: 'gap', lost: true });
    // The answered commit is in no state the database was in since: it is gone.
    const live = new Database(file, { readonly: true });
    expect(live.prepare('SELECT v FROM t ORDER BY id').pluck().all()).toEqual(['one', 'two', 'three', 'after']);
    live.close();
    // From history's last commit (exclusive) to the gap's snapshot, no state can be told.
    for (const at of [lastKept + 1, answeredAt, gap.snapshot!.at - 1]) expect(refusal(at), `the moment ${at}`).toBe('HISTORY_LOST');
    for (const { at, hash } of moments) expect(restoredHash(at), `the moment ${at}`).toBe(hash);
    expect(historyView(dataDir, ID, 30, clock).lost).toEqual([
      { after: new Date(lastKept).toISOString(), before: new Date(gap.snapshot!.at).toISOString(), generation: gap.name },
    ]);
  });

  it('with no commit answered past it: the gap is not lost, and its stretch restores the last state history holds', () => {
    const lastKept = rewriteBehindCapture(false);
    const gap = reopenAndGoOn();
    expect(gap.snapshot?.reason).toBe('gap');
    expect(gap.snapshot?.lost).toBeFalsy();
    const keptHash = moments.find((m) => m.at === lastKept)!.hash;
    for (const at of [lastKept + 1, gap.snapshot!.at - 1]) expect(restoredHash(at), `the moment ${at}`).toBe(keptHash);
    for (const { at, hash } of moments) expect(restoredHash(at), `the moment ${at}`).toBe(hash);
    expect(historyView(dataDir, ID, 30, clock).lost).toEqual([]);
  });
});
