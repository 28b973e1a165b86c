import type { Worker } from 'node:worker_threads';
import { hashThreadWait, keptThread } from './kept-thread.ts';

/** A file being flushed to disk on another thread while this one writes it; see {@link syncBehind}. */
export interface SyncBehind {
  /** Stops flushing and waits for the flush under way; the caller's own fsync then finds little left. Idempotent. */
  stop(): void;
}

/** How long the thread rests between two flushes: a flush with nothing new to write returns at once. */
const REST_MS = 2;

// Run on one thread per process, kept between tasks (`keptThread`). `ctl` holds [stop, done]:
// the loop flushes what was written so far, rests a moment, again, until told to stop; then it
// says it is done.
const SOURCE = `
const fs = require('node:fs');
const { parentPort } = require('node:worker_threads');
parentPort.on('message', ({ file, ctl }) => {
  const c = new Int32Array(ctl);
  let fd;
  try {
    fd = fs.openSync(file, 'r+');
    while (Atomics.load(c, 0) === 0) {
      fs.fdatasyncSync(fd);
      Atomics.wait(c, 0, 0, ${REST_MS});
    }
  } catch {
    // Flushing early only saves time: the caller's own fsync is what makes the file durable.
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
    Atomics.store(c, 1, 1);
    Atomics.notify(c, 1);
  }
});
`;

const syncThread = keptThread(SOURCE);

/**
 * Flushes `file` (which must exist) to disk on another thread, over and over, while this thread
 * writes it: a restore copies 100 MB into a new file and must fsync it before it is used, and
 * the fsync alone took as long as the copy (ext4 wrote the whole file back only then). Flushed
 * as it is written, the device works while the copy goes on and the final fsync finds little
 * left. Node has no sync_file_range, which would do this without a thread. Never fails: with no
 * thread to be had, nothing is flushed early.
 */
export function syncBehind(file: string): SyncBehind {
  const ctl = new SharedArrayBuffer(8);
  const c = new Int32Array(ctl);
  let worker: Worker;
  try {
    worker = syncThread.get();
    worker.postMessage({ file, ctl });
  } catch {
    return { stop() {} };
  }
  let stopped = false;
  return {
    stop() {
      if (stopped) return;
      stopped = true;
      Atomics.store(c, 0, 1);
      Atomics.notify(c, 0);
      // Bounded like the hash thread: a flush that never returns must not hang the executor child.
      if (Atomics.wait(c, 1, 0, hashThreadWait.ms) === 'timed-out') {
        syncThread.retire(worker);
      }
    },
  };
}
