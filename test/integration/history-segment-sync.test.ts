import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// A checkpoint fsyncs the live WAL and the database file, then the next commit starts the WAL
// over: past it, a commit's frames exist only in history's segment. Written and never flushed,
// a power cut after the checkpoint left the live file with commits history had lost (and the
// next WAL's frames appended behind the hole restored pages of two states mixed). A power cut
// cannot be made here; the order of the system calls that decide it can be read: every fsync
// of the database file (a checkpoint's last step) must come after an fdatasync of the segment
// and its index that hold the frames it folds in.
const CHILD = fileURLToPath(new URL('../helpers/segment-sync-child.mjs', import.meta.url));

interface Sync {
  call: string;
  file: string;
}

function syncsOf(args: object, dir: string): Sync[] {
  const trace = path.join(dir, 'strace.out');
  const run = spawnSync('strace', ['-f', '-y', '-qq', '-e', 'trace=fsync,fdatasync', '-o', trace, process.execPath, CHILD, JSON.stringify({ dir, ...args })], {
    encoding: 'utf8',
  });
  expect(run.stderr).toBe('');
  expect(run.stdout).toBe('done\n');
  const syncs: Sync[] = [];
  for (const line of fs.readFileSync(trace, 'utf8').split('\n')) {
    const m = /(fsync|fdatasync)\(\d+<([^>]*)>\) = 0/.exec(line);
    if (m) syncs.push({ call: m[1]!, file: m[2]! });
  }
  return syncs;
}

const isDbFile = (s: Sync, dir: string) => s.file === path.join(dir, 'db.sqlite');
const isSegment = (s: Sync, ext: string) => s.file.includes(`${path.sep}segments${path.sep}`) && s.file.endsWith(ext);

/** For each fsync of the database file after history began, whether a segment's data and index were flushed since the one before. */
function flushedBefore(syncs: Sync[], dir: string): boolean[] {
  const out: boolean[] = [];
  let data = false;
  let index = false;
  // Not before history's first generation is there: its snapshot is the file itself.
  const first = syncs.findIndex((s) => s.file.endsWith('snapshot.sqlite'));
  expect(first).toBeGreaterThan(-1);
  for (const s of syncs.slice(first)) {
    if (isSegment(s, '.wal')) data = true;
    if (isSegment(s, '.idx')) index = true;
    if (isDbFile(s, dir)) {
      out.push(data && index);
      data = false;
      index = false;
    }
  }
  return out;
}

describe("history's segments are on disk before the WAL they copy is folded into the file", () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-segment-sync-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("at each of capture's checkpoints and at the handle's last close", () => {
    const sub = fs.mkdtempSync(path.join(dir, 'checkpoints-'));
    const syncs = syncsOf({ commits: 24 }, sub);
    // Over 200 KiB of WAL at 64 KiB a checkpoint, then the close: several folds into the file.
    const folds = flushedBefore(syncs, sub);
    expect(folds.length).toBeGreaterThanOrEqual(3);
    expect(folds).toEqual(folds.map(() => true));
  });

  it('when a new generation begins from the file (a restore, a gap)', () => {
    const sub = fs.mkdtempSync(path.join(dir, 'generation-'));
    const syncs = syncsOf({ commits: 2, regenerate: true }, sub);
    const folds = flushedBefore(syncs, sub);
    expect(folds.length).toBeGreaterThanOrEqual(1);
    expect(folds).toEqual(folds.map(() => true));
  });
});
