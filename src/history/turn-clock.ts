import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * How long one turn of the event loop may run a long read before it yields (ms). The shard
 * worker's thread serves every database of its shard: a first activity page read 40,000 commits
 * in one turn and stalled the others' calls 169–221 ms (issue 29).
 */
export const TURN_MS = 10;

/**
 * Lets a long read on the shard worker's thread give the event loop back every {@link TURN_MS}:
 * the read calls {@link TurnClock.tick} between pieces of work, which yields (`setImmediate`, so
 * timers and I/O waiting run first) once the turn has run long enough. Chosen over a
 * worker_thread: the kept history must live where the page is made (a thread would copy it back
 * or keep a second cache), and the rows arrive from the executor on this thread anyway.
 */
export class TurnClock {
  private since = performance.now();

  constructor(private readonly budgetMs = TURN_MS) {}

  /** Yields when this turn has run past the budget; else answers at once (no promise made). */
  tick(): Promise<void> | undefined {
    if (performance.now() - this.since < this.budgetMs) return undefined;
    return nextTurn().then(() => {
      this.since = performance.now();
    });
  }
}
