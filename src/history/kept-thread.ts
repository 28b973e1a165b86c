import { Worker } from 'node:worker_threads';

/** A worker thread kept for the process's life (unreferenced), started on first use and again after it died. */
export interface KeptThread {
  /** The thread, started now when there is none. @throws Error when it cannot be started. */
  get(): Worker;
  /** Gives `worker` up (stuck past its caller's wait): the next `get` starts another. */
  retire(worker: Worker): void;
}

/**
 * Keeps one thread running `source` (plain JavaScript, node built-ins only, so it starts without
 * the TypeScript loader): starting a thread costs ~25 ms, as much as checking 50 MB, and a
 * restore asks for one while it copies a snapshot.
 */
export function keptThread(source: string): KeptThread {
  let thread: Worker | undefined;
  return {
    get() {
      if (thread) return thread;
      const started = new Worker(source, { eval: true, execArgv: [] });
      started.unref();
      const forget = () => {
        if (thread === started) thread = undefined;
      };
      started.on('error', forget);
      started.on('exit', forget);
      thread = started;
      return started;
    },
    retire(worker) {
      if (thread === worker) thread = undefined;
      void worker.terminate().catch(() => undefined);
    },
  };
}
