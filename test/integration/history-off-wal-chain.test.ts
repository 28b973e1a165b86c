import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { codeOf } from '../../src/errors.ts';
import { capture, finishCapture, forgetCapture, lockForCapture, type CaptureOptions } from '../../src/history/capture.ts';
import { closeWal } from '../../src/history/capture-connection.ts';
import { listGenerations, listSegments, localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { commitLine, readIndex } from '../../src/history/segment-index.ts';
import { frameBytes, frameOffset, parseWalHeader, WAL_HEADER_BYTES, walChecksum } from '../../src/history/wal-format.ts';
import { integrity } from '../helpers/history.ts';

// Session 30, G7: history whose end is off the chain of the WAL it copies: its segment holds a
// commit past what SQLite committed (one SQLite rolled back after writing its every frame, which a
// build before this session copied: history-rolled-back-commit-frame.test.ts), so the WAL's real
// next commit, written over it, does not follow on from history's last frame. Every copy then
// found nothing and said nothing, and restores after answered the state without the commits
// acknowledged since (a checkpoint folded them into the file). Capture now checks history's end
// against the WAL index's committed end (same salts: same frame, same checksum) and, off it,
// begins a gap generation marked lost: restores in between refuse (HISTORY_LOST), later ones hold
// every write.

const ID = 'oc/a';
let dataDir: string;
let file: string;
let clock: number;
let opts: CaptureOptions;

beforeEach(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-off-wal-chain-'));
  file = path.join(dataDir, 'db.sqlite');
  clock = Date.parse('2026-11-01T00:00:00Z');
  opts = { source: localSource(dataDir, ID), checkpointBytes: 64 * 1024 * 1024, now: () => clock };
});

afterEach(() => {
  forgetCapture(file);
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/** A write as the executor answers one: committed, its time taken under the write lock, copied. */
function write(db: Database.Database, v: string): number {
  db.prepare('INSERT INTO t (v) VALUES (?)').run(v);
  clock += 1_000;
  finishCapture(lockForCapture(db, file, opts, true));
  return clock;
}

/** Appends to the newest segment a commit of one frame past the WAL's last, chained from it: a commit SQLite rolled back. */
function appendRolledBackCommit(): void {
  const seg = listSegments(listGenerations(opts.source).at(-1)!).at(-1)!;
  const last = readIndex(seg.indexPath).commits.at(-1)!;
  const data = fs.readFileSync(seg.dataPath);
  const hdr = parseWalHeader(data.subarray(0, WAL_HEADER_BYTES))!;
  const fb = frameBytes(hdr.pageSize);
  // The last frame again (its page as it was), as a commit: a state that never was, one frame on.
  const frame = Buffer.from(data.subarray(frameOffset(hdr.pageSize, last.frames), frameOffset(hdr.pageSize, last.frames) + fb));
  frame.writeUInt32BE(last.dbPages, 4);
  let [c1, c2] = walChecksum(hdr.bigEndian, frame, 0, 8, last.c1, last.c2);
  [c1, c2] = walChecksum(hdr.bigEndian, frame, 24, fb, c1, c2);
  frame.writeUInt32BE(c1, 16);
  frame.writeUInt32BE(c2, 20);
  fs.appendFileSync(seg.dataPath, frame);
  clock += 1_000;
  fs.appendFileSync(seg.indexPath, commitLine({ at: clock, frames: last.frames + 1, dbPages: last.dbPages, c1, c2 }));
}

function restoredValues(at: number): string[] | string {
  let plan: ReturnType<typeof planRestore>;
  try {
    plan = planRestore(opts.source, { at });
  } catch (err) {
    return codeOf(err) ?? String(err);
  }
  const out = path.join(dataDir, `restored-${at}.sqlite`);
  buildRestore(plan, out);
  expect(integrity(out)).toBe('ok');
  const db = new Database(out, { readonly: true });
  try {
    return db.prepare('SELECT v FROM t ORDER BY id').pluck().all() as string[];
  } finally {
    db.close();
  }
}

describe('history off the chain of the WAL it copies', () => {
  it('begins a gap marked lost at the next copy: no restore answers without a write acknowledged before its moment', () => {
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('wal_autocheckpoint = 0');
    capture(db, file, opts);
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    clock += 1_000;
    capture(db, file, opts);
    const one = write(db, 'one');
    forgetCapture(file);
    appendRolledBackCommit();
    // History's checkpoints come due: a copy that finds nothing checkpoints as one that copied.
    opts.checkpointBytes = 4096;
    const two = write(db, 'two');
    const three = write(db, 'three');
    closeWal(db);
    db.close();

    expect(restoredValues(one)).toEqual(['one']);
    // The gap's snapshot is taken as the write it found off the chain is answered (its time).
    expect(restoredValues(two)).toEqual(['one', 'two']);
    // Between history's end (the commit that never was) and that snapshot, no state is told.
    expect(restoredValues(two - 1)).toBe('HISTORY_LOST');
    expect(restoredValues(three)).toEqual(['one', 'two', 'three']);
    expect(listGenerations(opts.source).map((g) => [g.snapshot?.reason, g.snapshot?.lost ?? false])).toEqual([
      ['first', false],
      ['gap', true],
    ]);
  });
});
