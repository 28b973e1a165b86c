// The children that fill one place of a pool, one after another: moved out of
// executor-process.ts, which keeps what the place sends its child and what answers for it.

import type { ChildProcess } from 'node:child_process';
import type { ExecutorProcessOptions } from './executor-options.ts';
import { endExecutorChild, startExecutorChild } from './executor-spawn.ts';

/** A child that cannot start (or dies at once) is tried again after this, not in a loop. */
const RESPAWN_BACKOFF_MS = 1000;
/**
 * Starts that may fail in a row before a place counts as unable to start (`broken`). One failed
 * start is no sign of that: children killed while they start (an OOM killer, an operator's
 * `kill`) made a pool answer every call "could not start" at once, though the next child
 * started fine (issue 25). Tried again after 100, 200, 400, 800 ms: a few seconds in all.
 */
export const START_ATTEMPTS = 5;
const startBackoffMs = (failures: number): number => Math.min(RESPAWN_BACKOFF_MS, 100 * 2 ** (failures - 1));
let serial = 0;

/** What the place does as its children come and go. */
export interface SuccessionHooks {
  /** `child` (ready, no listeners yet) is the place's own since `now`: listen to it. */
  adopted(child: ChildProcess, now: number): void;
  /** The child in place was let go; it is killed next, if it lives. */
  released(): void;
  /** A start failed and the place is down, or a child became its own: the pool looks again. */
  progress(): void;
  /** A child started ahead of need (ready, no listeners), to replace a dead one at once. */
  spare(): ChildProcess | undefined;
}

/**
 * The child in one place of a pool, and the ones that follow it: starts it (again after a
 * failed start, backing off; `broken` after {@link START_ATTEMPTS} failures in a row), replaces
 * it when it is killed or dies (by the pool's spare at once, or by a new child), and ends it
 * when the place stops. What is sent to the child is the place's (see `ExecutorProcess`).
 */
export class ChildSuccession {
  /** Unique per child started (in this process): tells a pool whether a handle may be stale. */
  childId = 0;
  /** The child in place, while there is one. */
  child?: ChildProcess;
  /** Changed only here; the place reads it. */
  state: 'starting' | 'ready' | 'down' | 'stopped' = 'down';
  /** Why it could not start, while down. */
  lastError = '';
  private retry?: NodeJS.Timeout;
  private spawnedAt = 0;
  private starting?: Promise<void>;
  /** Starts failed in a row; reset by a child that starts. */
  private startFailures = 0;
  /** `start()` callers, told once a child is ready or the place is `broken`. */
  private startWaiters: { resolve: () => void; reject: (err: Error) => void }[] = [];
  private stopping = false;
  /** The pid of the child this one replaces, for the respawn's log line. */
  private replacedPid?: number;

  constructor(
    /** The place's index, for log lines. */
    private readonly index: number,
    private readonly opts: ExecutorProcessOptions,
    private readonly hooks: SuccessionHooks,
  ) {}

  /**
   * Starts the child; resolves once one listens, trying again after a failed start.
   * @throws Error when {@link START_ATTEMPTS} starts in a row fail.
   */
  start(): Promise<void> {
    const started = new Promise<void>((resolve, reject) => this.startWaiters.push({ resolve, reject }));
    void this.spawn().catch(() => undefined);
    return started;
  }

  /**
   * Its last {@link START_ATTEMPTS} children could not start (it goes on trying, every second):
   * until one does, what waits for it is answered rather than held.
   */
  get broken(): boolean {
    return this.state !== 'ready' && this.startFailures >= START_ATTEMPTS;
  }

  /** The child in place started less than a backoff ago: one that dies so soon is not replaced in a loop. */
  get justStarted(): boolean {
    return Date.now() - this.spawnedAt < RESPAWN_BACKOFF_MS;
  }

  /** Starts no child from now on; once `drained` (what was sent) is done, ends the one in place. */
  async stop(drained?: Promise<void>): Promise<void> {
    this.stopping = true;
    if (drained) await drained;
    await this.starting;
    this.state = 'stopped';
    clearTimeout(this.retry);
    const child = this.child;
    this.child = undefined;
    if (child) await endExecutorChild(child);
  }

  /** Stops using `child` (killing it if it lives) and starts the next one, at once or after the backoff. */
  replace(child: ChildProcess, why: string, backoff = false): void {
    if (this.child !== child) return;
    this.child = undefined;
    this.hooks.released();
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (this.stopping || this.state === 'stopped') {
      this.state = 'stopped';
      return;
    }
    this.state = 'down';
    this.replacedPid = child.pid;
    const spare = backoff ? undefined : this.hooks.spare();
    this.opts.logger?.info(
      { child: this.index, childPid: child.pid, why, by: spare ? 'the spare' : `a new child in ${backoff ? RESPAWN_BACKOFF_MS : 0} ms` },
      'replacing executor child',
    );
    // Adopted here, before the caller hands the waiting statements back to the pool: they find
    // this child ready.
    if (spare) this.adopt(spare, false);
    else this.respawnAfter(backoff ? RESPAWN_BACKOFF_MS : 0);
  }

  private respawnAfter(ms: number): void {
    clearTimeout(this.retry);
    this.retry = setTimeout(() => {
      if (this.state === 'down' && !this.stopping) void this.spawn().catch(() => undefined);
    }, ms);
    this.retry.unref();
  }

  private spawn(): Promise<void> {
    this.state = 'starting';
    const { dataDir, heapLimitMb, handleCacheSize, maxResultBytes, maxOffloadBytes, statementCacheBytes, history, child } = this.opts;
    const starting = startExecutorChild({ dataDir, heapLimitMb, handleCacheSize, maxResultBytes, maxOffloadBytes, statementCacheBytes, history }, child).then(
      (child) => this.adopt(child),
      (err: Error) => {
        this.lastError = err.message;
        this.startFailures++;
        this.opts.logger?.error({ child: this.index, err: err.message, failures: this.startFailures }, 'executor child failed to start');
        if (this.broken || this.stopping) for (const waiter of this.startWaiters.splice(0)) waiter.reject(err);
        if (!this.stopping) {
          this.state = 'down';
          this.respawnAfter(startBackoffMs(this.startFailures));
          this.hooks.progress();
        }
        throw err;
      },
    );
    this.starting = starting.catch(() => undefined);
    return starting;
  }

  /** Makes a ready child (with no listeners) this place's own; `notify` tells the pool. */
  private adopt(child: ChildProcess, notify = true): void {
    if (this.stopping) {
      this.state = 'stopped';
      void endExecutorChild(child);
      for (const waiter of this.startWaiters.splice(0)) waiter.resolve();
      return;
    }
    this.child = child;
    this.childId = ++serial;
    this.state = 'ready';
    this.lastError = '';
    this.startFailures = 0;
    for (const waiter of this.startWaiters.splice(0)) waiter.resolve();
    this.spawnedAt = Date.now();
    this.hooks.adopted(child, this.spawnedAt);
    if (this.replacedPid !== undefined) this.opts.metrics?.executorRestarts.inc();
    if (this.replacedPid !== undefined)
      this.opts.logger?.info({ child: this.index, childPid: child.pid, replacedPid: this.replacedPid }, 'executor child respawned');
    this.replacedPid = undefined;
    if (notify) this.hooks.progress();
  }
}
