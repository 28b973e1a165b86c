import { Worker } from 'node:worker_threads';

/** How often the watcher looks for its parent. */
const CHECK_MS = 200;
/**
 * Time the main thread gets to close cleanly once the parent is gone: an idle child hears the
 * channel close, closes its handles (checkpointing each WAL) and exits well within it.
 */
const GRACE_MS = 1000;

// Plain JavaScript, evaluated as is: the thread needs no loader, and stays a few lines.
const WATCHER = `
const { workerData } = require('node:worker_threads');
const timer = setInterval(() => {
  if (process.ppid === workerData.ppid) return;
  clearInterval(timer);
  setTimeout(() => process.kill(process.pid, 'SIGKILL'), workerData.graceMs);
}, workerData.checkMs);
`;

/**
 * Makes this process die with its parent, even while its main thread is blocked in a
 * synchronous SQLite statement. A child hears its parent go through the IPC channel closing,
 * but only between statements: one SIGKILLed worker left its child running a runaway
 * statement, holding a write lock and a core, for as long as the statement ran. A worker thread
 * keeps its own event loop while the main thread is blocked; when the parent is gone (the
 * child is re-parented, so its ppid changes) it gives the main thread GRACE_MS to end cleanly,
 * then SIGKILLs the process (WAL makes that safe). Linux has PR_SET_PDEATHSIG for this, which
 * Node does not expose. The thread is unref'd: it never keeps the process alive.
 * @param ppid the parent's pid as the child read it at its start: the watch may start later
 *   (with the first request), when the parent could already be gone.
 */
export function dieWithParent(ppid: number): void {
  const watcher = new Worker(WATCHER, {
    eval: true,
    workerData: { ppid, checkMs: CHECK_MS, graceMs: GRACE_MS },
    // codeRangeSizeMb: Node 22+ reserves each isolate's code range writable (512 MiB by default),
    // inside the child's data-segment limit.
    resourceLimits: { maxOldGenerationSizeMb: 8, maxYoungGenerationSizeMb: 1, codeRangeSizeMb: 16 },
  });
  // A watcher that fails must not take the child (and its statement) with it.
  watcher.on('error', (err) => process.stderr.write(`executor-child: the parent watcher stopped: ${String(err)}\n`));
  watcher.unref();
}
