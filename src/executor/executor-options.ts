import type { ChildModule } from './child-module.ts';
import type { ChildOptions } from './executor-protocol.ts';
import type { Metrics } from '../metrics.ts';
import type { OutsideKillCounts } from './outside-kills.ts';

/** The subset of a pino logger the executor uses. */
export interface ExecutorLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  trace?(obj: object, msg: string): void;
  isLevelEnabled?(level: string): boolean;
}

/**
 * What every child of a pool is started with: the child's own options (`ChildOptions`, sent to
 * it as JSON), and what the parent keeps. The worker passes them from its Config.
 */
export interface ExecutorProcessOptions extends ChildOptions {
  /** A statement running longer is killed with its child: STATEMENT_TIMEOUT. */
  statementTimeoutMs: number;
  logger?: ExecutorLogger;
  /** Where statements killed from outside are remembered beyond this process (the worker's Redis); without it, in memory only. */
  outsideKills?: OutsideKillCounts;
  /** Counts kills and restarts of children for `/metrics`. */
  metrics?: Pick<Metrics, 'executorKills' | 'executorRestarts'> & Partial<Pick<Metrics, 'executorOverflow'>>;
  /**
   * The child's module; by default the one beside this code, as it runs (see `childModule`). The
   * tests' pools fork the build their global setup has just made current: under tsx each child
   * start cost about 500 ms more CPU, and the suite starts hundreds.
   */
  child?: ChildModule;
}

/** Options of an `ExecutorPool`; the worker passes them from its Config. */
export interface ExecutorPoolOptions extends ExecutorProcessOptions {
  /** Children (EXECUTOR_POOL_SIZE). */
  size: number;
  /** Children one workspace may hold at once (EXECUTOR_WORKSPACE_SHARE). */
  workspaceShare: number;
  /**
   * Children beyond `size` kept for the overflow lane (EXECUTOR_OVERFLOW; see `OverflowLane`):
   * taken only while every pooled child runs a statement past `longMs`. Default 0: no lane.
   */
  overflow?: number;
  /** What counts as a long statement for the lane, in ms (EXECUTOR_LONG_MS). Default 250. */
  longMs?: number;
}

/**
 * Checks what ends up in a shell command line and a setTimeout; config validated them, this
 * keeps any other caller of `ExecutorPool` honest. `overflow` and `longMs` as defaulted.
 * @throws RangeError naming the option out of range.
 */
export function checkPoolOptions(opts: ExecutorPoolOptions, overflow: number, longMs: number): void {
  for (const key of ['statementTimeoutMs', 'heapLimitMb', 'handleCacheSize', 'maxResultBytes', 'size', 'workspaceShare'] as const) {
    if (!Number.isSafeInteger(opts[key]) || opts[key] < 1) throw new RangeError(`${key} must be a positive integer, got ${opts[key]}`);
  }
  if (!Number.isSafeInteger(overflow) || overflow < 0) throw new RangeError(`overflow must be a non-negative integer, got ${overflow}`);
  if (!Number.isSafeInteger(longMs) || longMs < 1) throw new RangeError(`longMs must be a positive integer, got ${longMs}`);
}
