// Evicts waiting for their shards' statements: moved out of executor-pool.ts, which sends an
// evict to every child once it may go (see `evictEverywhere`).

import type { DatabaseLines } from './database-lines.ts';

/**
 * Evicts of shards' handles that wait until no line of those shards has statements in hand, as
 * with one child, where an evict waited its turn behind them.
 */
export class ShardEvictions {
  private readonly waiting: { shards: number[]; done: () => void }[] = [];

  constructor(private readonly lines: DatabaseLines) {}

  /** Resolves once no line of `shards` has statements in hand; asked only while one has. */
  wait(shards: number[]): Promise<void> {
    return new Promise<void>((done) => this.waiting.push({ shards, done }));
  }

  /** A line gave its child up with nothing left: the evicts whose shards are idle now go on. */
  check(): void {
    if (!this.waiting.length) return;
    for (const waiting of [...this.waiting]) {
      if (this.lines.busyIn(waiting.shards)) continue;
      this.waiting.splice(this.waiting.indexOf(waiting), 1);
      waiting.done();
    }
  }
}
