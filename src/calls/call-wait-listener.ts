import type { Envelope } from '../contracts/envelope.ts';

/** Who keeps the watches: told when a listener is gone (`CallWaiters.removed`). */
interface WatchOwner {
  removed<T>(key: string, watch: Watch, set: Set<Listener<T>>, listener: Listener<T>): void;
}

/**
 * One wait on a call: how to settle it, and how to stop listening to its signal once it is
 * settled. A class, not an object of closures: a call's wait is made for every call, and its
 * closures (five, with their context) were a share of what the caller spends per read (issue 31).
 */
export class Listener<T> {
  resolve!: (value: T) => void;
  reject!: (err: unknown) => void;
  /** Set with a signal: its abort handler, to remove once the wait is settled. */
  private onAbort?: () => void;

  constructor(
    private readonly waiters: WatchOwner,
    private readonly key: string,
    private readonly watch: Watch,
    private readonly set: Set<Listener<T>>,
    private readonly signal?: AbortSignal,
  ) {}

  /** Listens to the signal: an abort drops this wait and rejects it with the signal's reason. */
  listen(): void {
    const signal = this.signal;
    if (!signal) return;
    this.onAbort = () => {
      this.remove();
      this.reject(signal.reason);
    };
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  settle(value: T): void {
    this.detach();
    this.resolve(value);
  }

  fail(err: unknown): void {
    this.detach();
    this.reject(err);
  }

  /** Stops listening to the signal, for a wait left pending (a parked wait of a call that ended). */
  detach(): void {
    if (this.onAbort) this.signal!.removeEventListener('abort', this.onAbort);
    this.onAbort = undefined;
  }

  /** Drops this wait alone; the watch goes with its last one. */
  remove(): void {
    this.detach();
    this.waiters.removed(this.key, this.watch, this.set, this);
  }
}

/** Everyone in one client waiting on one call, and the one look at its job they share. */
export interface Watch {
  completed: Set<Listener<Envelope>>;
  parked: Set<Listener<Record<string, unknown>>>;
  /** The shared safety-net look at the job (see {@link CallWaiters.lookEvery}), while anyone waits for its end. */
  look?: NodeJS.Timeout;
  /** Runs that look at once, or right after the one under way (see {@link CallWaiters.lookNow}); set with {@link look}. */
  lookAtOnce?: () => void;
  /** A run of the call ended then (`finishedOn`) and was put back to run again: its announcement is not waited for (`CallWaiters.putBack`). */
  endedBefore?: number;
  /** Changed whenever the job is put back to run: a look begun under another stamp answers no wait here (`CallWaiters.complete`). */
  stamp: number;
  /** Put-backs of the job under way (`CallWaiters.putBack`): no look answers the waits meanwhile. */
  puttingBack?: number;
}

/**
 * Where a wait's promise keeps its listener, so that {@link CallWaiters.drop} finds it: a
 * property of the promise, not an entry of a WeakMap, whose insert for every call cost more
 * than the rest of the wait (issue 31).
 */
export const LISTENER = Symbol('listener');
export type Owned = Promise<unknown> & { [LISTENER]?: Listener<never> };
