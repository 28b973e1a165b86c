import type { ChildProcess } from 'node:child_process';
import type { ExecutorLogger } from './executor-options.ts';
import type { ChildOptions } from './executor-protocol.ts';
import type { ChildModule } from './child-module.ts';
import { endExecutorChild, startExecutorChild } from './executor-spawn.ts';

/** A spare that could not start, or died while it waited, is tried again after this. */
const RETRY_MS = 1000;

/**
 * One executor child started ahead of need, so a child killed for its deadline (or dead of
 * memory) is replaced at once. Starting a child takes about half a second (Node, the TypeScript
 * loader, better-sqlite3); in that half second the database whose statement was killed took the
 * pool's other child, and on 2 cores every other database waited: with one agent's runaway
 * statements killed every 10 s, the others' read p99 was 5× the quiet one.
 */
export class SpareChild {
  private child?: ChildProcess;
  private starting?: Promise<void>;
  private stopped = false;
  private readonly onExit = () => {
    this.child = undefined;
    this.later();
  };
  // A spare's channel errors must not crash the worker; its exit says what matters.
  private readonly onError = () => undefined;

  constructor(
    private readonly opts: ChildOptions,
    private readonly logger?: ExecutorLogger,
    /** The module the pool's own children run: a spare stands in for one of them. */
    private readonly module?: ChildModule,
  ) {}

  /** The spare's pid while one waits, ready. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Starts the spare (in the background). */
  start(): void {
    this.stopped = false;
    this.fill();
  }

  /** The spare, ready and idle, if there is one now; the next is started at once. */
  take(): ChildProcess | undefined {
    const child = this.child;
    this.child = undefined;
    if (child) {
      child.off('exit', this.onExit);
      child.off('error', this.onError);
    }
    this.fill();
    return child;
  }

  /** Ends the spare. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.starting;
    const child = this.take();
    if (child) await endExecutorChild(child);
  }

  private fill(): void {
    if (this.stopped || this.child || this.starting) return;
    this.starting = startExecutorChild(this.opts, this.module).then(
      (child) => {
        this.starting = undefined;
        child.on('exit', this.onExit);
        child.on('error', this.onError);
        this.child = child;
      },
      (err: Error) => {
        this.starting = undefined;
        this.logger?.error({ err: err.message }, 'spare executor child failed to start');
        this.later();
      },
    );
  }

  private later(): void {
    if (!this.stopped) setTimeout(() => this.fill(), RETRY_MS).unref();
  }
}
