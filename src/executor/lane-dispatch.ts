// When the overflow lane's children are given out, and to which waiting lines: moved out of
// executor-pool.ts, which binds the line it is given to the child (see `OverflowLane` for why a
// lane, and which statements it takes).

import type { Line } from './database-lines.ts';
import type { ExecutorProcess } from './executor-process.ts';
import type { LineTurns } from './line-turns.ts';
import { laneOpens, type OverflowLane } from './overflow-lane.ts';
import type { PoolPlaces } from './pool-places.ts';

/**
 * The overflow lane's dispatch: its idle children go to waiting lines it admits only while every
 * pooled child runs a statement past `longMs`; until then a timer waits for that moment.
 */
export class LaneDispatch {
  /** Armed while lines wait and the lane would open once the pooled children's statements pass `longMs`. */
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly places: PoolPlaces,
    private readonly turns: LineTurns,
    private readonly lane: OverflowLane,
    private readonly longMs: number,
    /** The line each place runs, by its index (the pool's, read only here). */
    private readonly bound: readonly (Line | undefined)[],
    private readonly bind: (line: Line, slot: ExecutorProcess) => void,
  ) {}

  /**
   * Gives the lane's idle children to waiting lines it admits, while every pooled child runs a
   * long statement; otherwise arms a timer for when they all will have, if lines still wait.
   */
  dispatch(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.turns.size === 0) return;
    const now = Date.now();
    const state = laneOpens(
      this.places.pooled.map((s) => (s.ready ? s.headRunningMs(now) : 'down')),
      this.longMs,
    );
    if (!state.open) {
      if (state.inMs !== undefined) this.timer = setTimeout(() => this.dispatch(), state.inMs).unref();
      return;
    }
    for (const slot of this.places.lane) {
      if (!slot.available || this.bound[slot.index]) continue;
      const line = this.turns.nextForLane(this.lane, now);
      if (!line) return;
      this.bind(line, slot);
    }
  }

  /** The pool stops: no timer is left to fire. */
  stop(): void {
    clearTimeout(this.timer);
  }
}
