// Which waiting line an idle child takes: moved out of executor-pool.ts, which binds the line it
// is given to the child, feeds it, and gives the child up again.

import type { Line } from './database-lines.ts';
import type { ExecutorProcess } from './executor-process.ts';
import type { OverflowLane } from './overflow-lane.ts';
import { fairest, tier, WorkspaceUsage, type Aging } from './workspace-usage.ts';

/** How far into the waiting databases a busy line looks for one that could take its child. */
const PREFER_SCAN = 64;

/** What the turns need of the pool's options. */
export interface TurnOptions {
  /** Pooled children. */
  size: number;
  /** Children one workspace may hold at once. */
  workspaceShare: number;
  statementTimeoutMs: number;
}

/**
 * The lines waiting for a child of a pool, oldest first, and whose turn it is. A workspace holds
 * at most `workspaceShare` children at once: its other lines wait, and others find a child free.
 * An idle child takes the next turn of the round-robin over waiting workspaces (see
 * `WorkspaceUsage` and `fairest`): one holding no child before one holding a child, so none
 * takes a second while another waits; a workspace of known cheap statements before the rest, so
 * a quiet workspace's read waits for the next free child, not behind a burst of fresh
 * workspaces' runaways (twenty of them held one for 100 s under the former
 * least-recent-executor-time rule, to which a fresh workspace looked as light as a quiet one);
 * and, once cheap ones have taken every child in a row, one line at a time that waited a whole
 * deadline before all, so cheap ones cannot starve the rest. It prefers a line the child ran
 * last, when that one's turn is about as near (a reopen costs a file open, WAL set-up and every
 * statement prepared again), but passes the first at most `size` times.
 *
 * The pool says when a line takes a child and gives it up (`took`, `gave`): what each
 * workspace holds and has spent decides its turns.
 */
export class LineTurns {
  /** Lines with statements and no child, oldest first. */
  private readonly ready = new Set<Line>();
  private readonly usage: WorkspaceUsage;
  /** Lines holding a child they took ahead of cheap ones for their long wait: at most one. */
  private promoted = 0;
  /** Children given to lines of cheap workspaces in a row, from the waiting ones. */
  private cheapStreak = 0;

  constructor(private readonly opts: TurnOptions) {
    this.usage = new WorkspaceUsage(opts.statementTimeoutMs);
  }

  /** Lines waiting now. */
  get size(): number {
    return this.ready.size;
  }

  /** Whether `line` waits. */
  has(line: Line): boolean {
    return this.ready.has(line);
  }

  /** Whether `line`'s workspace may take another child now. */
  underShare(line: Line): boolean {
    return this.usage.holding(line.workspace) < this.opts.workspaceShare;
  }

  /**
   * Whether a waiting line could take `line`'s child if it gave it up: one under its share, or
   * one of the same workspace (whose share that child would free). Lines held back by their
   * workspace's share do not count, or a busy line would stop for nothing.
   */
  othersWait(line: Line): boolean {
    if (this.ready.size === 0) return false;
    let scanned = 0;
    for (const other of this.ready) {
      if (other.workspace === line.workspace || this.underShare(other)) return true;
      if (++scanned >= PREFER_SCAN) return true;
    }
    return false;
  }

  /** `line` waits for a child, behind those already waiting. */
  add(line: Line): void {
    if (this.ready.has(line)) return;
    this.ready.add(line);
    line.since = Date.now();
    this.usage.waits(line.workspace, line.since);
  }

  /** Nothing waits any more: returns what waited, for the caller to answer without running. */
  clear(): Line[] {
    const waited = [...this.ready];
    for (const line of this.ready) this.usage.leaves(line.workspace);
    this.ready.clear();
    return waited;
  }

  /** The waiting line the idle pooled child `slot` takes, no longer waiting; undefined when none may run now. */
  next(slot: ExecutorProcess): Line | undefined {
    // A long waiter goes ahead only once cheap ones took every child in a row: they keep all
    // of them busy. Sooner, it took the child a quiet read was about to get, in every burst.
    const open = this.promoted === 0 && this.cheapStreak >= this.opts.size;
    const aging: Aging = { now: Date.now(), afterMs: this.opts.statementTimeoutMs, open };
    const line = this.pickFor(slot, aging);
    if (!line) return undefined;
    this.ready.delete(line);
    const picked = tier(line, this.usage.standing(line.workspace), aging);
    this.cheapStreak = picked === 1 ? this.cheapStreak + 1 : 0;
    if (picked === 0) {
      line.promoted = true;
      this.promoted++;
    }
    return line;
  }

  /**
   * The waiting line an idle child of the overflow lane takes, no longer waiting: one the lane
   * admits whose workspace holds no child and whose turn starts first, the oldest of equals.
   */
  nextForLane(lane: OverflowLane, now: number): Line | undefined {
    let best: Line | undefined;
    let bestStart = Number.POSITIVE_INFINITY;
    for (const line of this.ready) {
      const head = line.queue[0];
      if (!head || line.closing || this.usage.holding(line.workspace) > 0) continue;
      const standing = this.usage.standing(line.workspace);
      if (!standing.cheap || standing.start >= bestStart || !lane.admits(line.workspace, head.req, now)) continue;
      best = line;
      bestStart = standing.start;
    }
    if (best) this.ready.delete(best);
    return best;
  }

  /** `line` took a child at `at`; `waited`: it was given one from the waiting, not one idle on arrival. */
  took(line: Line, at: number, waited: boolean): void {
    this.usage.take(line.workspace, at, waited);
  }

  /** `line` gave its child up at `now`, having spent `spentMs` of executor time on `statements`. */
  gave(line: Line, now: number, spentMs: number, statements: number): void {
    if (line.promoted) {
      line.promoted = false;
      this.promoted--;
    }
    this.usage.give(line.workspace, now, spentMs, statements);
  }

  /** The waiting line an idle child takes, or undefined when none may run now; `aging` as it was for it. */
  private pickFor(slot: ExecutorProcess, aging: Aging): Line | undefined {
    const allowed: Line[] = [];
    // A line waiting for every child to close its database (a restore) takes no child yet.
    for (const line of this.ready) if (this.underShare(line) && !line.closing) allowed.push(line);
    // Only the child that ran a line last may skip the reopen; another may hold a stale handle.
    const open = (line: Line) => line.lastChild === slot.childId && slot.recent.has(line.path);
    return fairest(allowed, (ws) => this.usage.standing(ws), open, this.opts.size, aging);
  }
}
