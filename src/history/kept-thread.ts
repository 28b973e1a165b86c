import { MessageChannel, Worker, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';

/** How long a caller waits for a kept thread's answer before doing the work itself (tests shorten it). */
export const hashThreadWait = { ms: 5 * 60 * 1000 };

/** A worker thread kept for the process's life (unreferenced), started on first use and again after it died. */
export interface KeptThread {
  /** The thread, started now when there is none. @throws Error when it cannot be started. */
  get(): Worker;
  /** Gives `worker` up (stuck past its caller's wait): the next `get` starts another. */
  retire(worker: Worker): void;
  /**
   * Hands the thread a task (`data` plus a reply `port` and a done `flag`, which its source
   * answers on); the function returned blocks until the answer and returns it. It throws when
   * no thread could be had, the answer says `error`, or none came within {@link hashThreadWait}
   * (the thread is then retired): the caller does the work itself.
   */
  task(data: object, about: string): (what: string) => unknown;
}

/** A kept thread's code range, in MiB: it runs a few small functions. */
const THREAD_CODE_RANGE_MB = 16;

/**
 * Keeps one thread running `source` (plain JavaScript, node built-ins only, so it starts without
 * the TypeScript loader): starting a thread costs ~25 ms, as much as checking 50 MB, and a
 * restore asks for one while it copies a snapshot. Own code rather than a library: a synchronous
 * wait on a thread, because the executor child runs these between two statements.
 */
export function keptThread(source: string): KeptThread {
  let thread: Worker | undefined;
  const kept: KeptThread = {
    get() {
      if (thread) return thread;
      // A small code range: on Node 22+ each isolate reserves its code range writable (512 MiB by
      // default), and the executor child runs under a data-segment limit that counts it.
      const started = new Worker(source, { eval: true, execArgv: [], resourceLimits: { codeRangeSizeMb: THREAD_CODE_RANGE_MB } });
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
    task(data, about) {
      const flag = new SharedArrayBuffer(4);
      const { port1, port2 } = new MessageChannel();
      let worker: Worker;
      try {
        worker = kept.get();
        worker.postMessage({ ...data, port: port2, flag }, [port2]);
      } catch (err) {
        // No thread to be had (out of memory, a sandbox): the caller does the work itself.
        port1.close();
        return () => {
          throw err;
        };
      }
      return (what) => {
        // Bounded: a thread that never started must not hang the executor child.
        const waitMs = hashThreadWait.ms;
        if (Atomics.wait(new Int32Array(flag), 0, 0, waitMs) === 'timed-out') {
          // The thread is stuck (a read that never returns) or far behind: every task after this
          // one would queue behind it and cost its caller the whole wait too. Retire it; the next
          // task starts a thread of its own.
          kept.retire(worker);
          port1.close();
          throw new Error(`${what}ing ${about} took over ${waitMs} ms`);
        }
        const msg = receiveMessageOnPort(port1 as MessagePort)?.message as { error?: string } | undefined;
        port1.close();
        if (!msg || msg.error) throw new Error(`could not ${what} ${about}: ${msg?.error ?? 'the thread gave no answer'}`);
        return msg;
      };
    },
  };
  return kept;
}
