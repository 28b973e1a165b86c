import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { hashOnThread, hashedOrUndefined } from '../../src/history/hash-worker.ts';
import { hashThreadWait } from '../../src/history/kept-thread.ts';
import { copyWithSha256, sha256File } from '../../src/history/snapshot.ts';

// Snapshots of large databases are hashed on a worker thread while the file is copied; the
// answer must be exactly the sha256 of what was copied, and a failure must fall back, not hang.
let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-hash-thread-'));
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('hashing on a worker thread', () => {
  it('copies a large file with the sha256 of its bytes, computed on the other thread', () => {
    const from = path.join(dir, 'big.bin');
    const data = Buffer.concat([randomBytes(1024 * 1024), Buffer.alloc(19 * 1024 * 1024 + 123, 7)]);
    fs.writeFileSync(from, data);
    const to = path.join(dir, 'copy.bin');
    const out = copyWithSha256(from, to);
    const want = createHash('sha256').update(data).digest('hex');
    expect(out).toEqual({ sha256: want, bytes: data.length });
    expect(sha256File(to)).toBe(want);
  });

  it('hashes and syncs a file, and answers undefined for one it cannot read', () => {
    const file = path.join(dir, 'small.bin');
    fs.writeFileSync(file, 'abc');
    expect(hashOnThread(file, true).result()).toEqual({ sha256: createHash('sha256').update('abc').digest('hex'), bytes: 3 });
    expect(hashedOrUndefined(hashOnThread(path.join(dir, 'missing.bin'), false))).toBeUndefined();
  });

  it('a task that never finishes costs its own caller, not every hash after it (the thread is kept per process)', () => {
    // A read that never returns (a hung mount; here a FIFO no one writes): the caller gives up
    // after the wait, and the next hash must not queue behind the stuck one on the same thread.
    const fifo = path.join(dir, 'stuck.fifo');
    execFileSync('mkfifo', [fifo]);
    const file = path.join(dir, 'after.bin');
    fs.writeFileSync(file, 'after');
    const saved = hashThreadWait.ms;
    hashThreadWait.ms = 300;
    try {
      expect(hashedOrUndefined(hashOnThread(fifo, false))).toBeUndefined();
      // Queued behind the stuck read, this would never answer. Waited for long enough that a new
      // thread starts on a loaded machine (300 ms once was not, in a CI run), and no timing asserted.
      hashThreadWait.ms = 30_000;
      expect(hashedOrUndefined(hashOnThread(file, false))).toEqual({ sha256: createHash('sha256').update('after').digest('hex'), bytes: 5 });
    } finally {
      hashThreadWait.ms = saved;
      // Unblock the stuck open (a writer that closes at once), whichever thread holds it.
      try {
        fs.closeSync(fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK));
      } catch {
        /* no reader left */
      }
    }
  });
});
