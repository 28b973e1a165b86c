// The places of a pool and their children: moved out of executor-pool.ts, which decides which
// database's line runs in which place.

import type { ExecutorPoolOptions } from './executor-options.ts';
import { START_ATTEMPTS } from './child-succession.ts';
import { ExecutorProcess, type ProcessHooks } from './executor-process.ts';
import type { ExecOutcome } from './executor-protocol.ts';
import type { PoolStatus } from './executor-status.ts';
import { SpareChild } from './spare-child.ts';

/**
 * A pool's places (see `ExecutorProcess`): `size` pooled ones, then `overflow` more for the
 * overflow lane (see `OverflowLane`), and a spare child started ahead of need, which takes a
 * place whose child was killed or died at once.
 */
export class PoolPlaces {
  /** The pooled places, then the overflow lane's. */
  readonly all: ExecutorProcess[];
  readonly pooled: ExecutorProcess[];
  /** The overflow lane's places. */
  readonly lane: ExecutorProcess[];
  private readonly spare: SpareChild;

  constructor(
    private readonly opts: ExecutorPoolOptions,
    overflow: number,
    hooks: Omit<ProcessHooks, 'spare'>,
  ) {
    const { dataDir, heapLimitMb, handleCacheSize, maxResultBytes, maxOffloadBytes, statementCacheBytes, history } = opts;
    this.spare = new SpareChild(
      { dataDir, heapLimitMb, handleCacheSize, maxResultBytes, maxOffloadBytes, statementCacheBytes, history },
      opts.logger,
      opts.child,
    );
    const withSpare: ProcessHooks = { ...hooks, spare: () => this.spare.take() };
    this.all = Array.from({ length: opts.size + overflow }, (_, i) => new ExecutorProcess(i, opts, withSpare));
    this.pooled = this.all.slice(0, opts.size);
    this.lane = this.all.slice(opts.size);
  }

  /**
   * Starts every child (and a spare, in the background).
   * @throws Error when one cannot start, `START_ATTEMPTS` times in a row.
   */
  async start(): Promise<void> {
    await Promise.all(this.all.map((s) => s.start()));
    this.spare.start();
  }

  /** The pids of the children running now. */
  get pids(): number[] {
    return this.all.flatMap((s) => (s.pid === undefined ? [] : [s.pid]));
  }

  /** No place could start a child lately (see `ExecutorProcess.broken`). */
  get broken(): boolean {
    return this.all.every((s) => s.broken);
  }

  /** Whether `slot` is one of the overflow lane's. */
  inLane(slot: ExecutorProcess): boolean {
    return slot.index >= this.opts.size;
  }

  /** The idle pooled place for a database at `dbPath`: one that has it open, else the one idle longest. */
  idleFor(dbPath: string): ExecutorProcess | undefined {
    let best: ExecutorProcess | undefined;
    for (const slot of this.pooled) {
      if (!slot.available) continue;
      if (slot.recent.has(dbPath)) return slot;
      if (!best || slot.idleSince < best.idleSince) best = slot;
    }
    return best;
  }

  /**
   * How long (s) the oldest commit that history capture lacks has waited in its WAL, over every
   * database these children have open; 0 when history holds every commit.
   */
  captureLagSeconds(now: number): number {
    let oldest: number | undefined;
    for (const s of this.all) if (s.captureBehindSince !== undefined && (oldest === undefined || s.captureBehindSince < oldest)) oldest = s.captureBehindSince;
    return oldest === undefined ? 0 : Math.max(0, now - oldest) / 1000;
  }

  /** What every place is doing (the lane's marked), with the statements `waiting` for one. */
  status(waiting: number): PoolStatus {
    const now = Date.now();
    const spare = this.spare.pid;
    const children = this.all.map((s) => (s.index < this.opts.size ? s.status(now) : { ...s.status(now), overflow: true as const }));
    const overflow = this.lane.length;
    return {
      size: this.opts.size,
      workspaceShare: this.opts.workspaceShare,
      waiting,
      children,
      ...(overflow ? { overflow } : {}),
      ...(spare ? { spare } : {}),
    };
  }

  /** Lets the statements sent finish, then ends every child and the spare. */
  async stop(): Promise<void> {
    await Promise.all([...this.all.map((s) => s.stop()), this.spare.stop()]);
  }

  /**
   * What a request gets while no child can start: UNAVAILABLE, unsettled, so its job is run again
   * (BullMQ's retry) rather than answered — nothing ran, and a call answered INTERNAL kept that
   * answer under its id (a storm of children killed while they started gave 296 writes it).
   */
  cannotStart(): ExecOutcome {
    const why = this.all.find((s) => s.lastError)?.lastError ?? 'no child is running';
    return {
      ok: false,
      error: { code: 'UNAVAILABLE', detail: `the database process could not start (${START_ATTEMPTS} tries in a row): ${why}` },
      unsettled: true,
    };
  }
}
