// When the statement a child runs is past its limit: moved out of executor-process.ts, which
// keeps what is sent to the child and what the kill does with it.

import type { ExecRequest } from './executor-protocol.ts';

/** A request a child holds, and since when (epoch ms) it counts against its limit. */
export interface Timed {
  req: ExecRequest;
  since: number;
}

/** What the deadline asks of the place whose child it watches. */
export interface DeadlineHolder {
  /** The request at the head of what the child was sent, while it has a child and a head. */
  head(): Timed | undefined;
  /**
   * The request the child's marks say it runs, if not the head: the head finished, its answer
   * held in the child behind the request running now (a big answer is written out over several
   * turns of the child's loop).
   */
  runningBehind(): Timed | undefined;
  /** The limit passed and the channel was read: the child is killed. */
  expired(): void;
}

/**
 * The deadline of the statement at the head of a child's pipeline: one timer, kept across idle
 * spells and armed again for what is left when it fires early, which hands the child to
 * `expired` only once the running statement's own limit passed and the channel holds no answer.
 */
export class HeadDeadline {
  private timer?: NodeJS.Timeout;
  /** When {@link timer} fires (ms since the epoch). */
  private timerAt = 0;
  /** A deadline passed; what the channel holds is read before the child is killed. */
  private checking = false;

  constructor(
    private readonly statementTimeoutMs: number,
    private readonly holder: DeadlineHolder,
  ) {}

  /** How long `req` may run: its own limit, or the pool's. */
  limitOf(req: ExecRequest): number {
    return req.timeoutMs ?? this.statementTimeoutMs;
  }

  /** Statements were sent at `now`, `head` the first of what the child then holds. */
  sent(head: ExecRequest, now: number): void {
    if (this.checking) return;
    // The timer armed for an earlier statement is kept across idle spells (see `idle`): firing
    // before this one's deadline, it arms itself again for what is left of it. A new one only
    // when there is none, or it would fire too late for a shorter limit.
    const due = now + this.limitOf(head);
    if (!this.timer || this.timerAt > due) this.arm(due - now);
    else this.timer.ref();
  }

  /** `head` is at the head since `since`, the one before it answered. */
  next(head: ExecRequest, since: number): void {
    // The timer was armed for the statement before (a snapshot's or a restore's 30 minutes,
    // say): one sent behind it with a shorter limit would run unchecked until then (review R2).
    const due = since + this.limitOf(head);
    if (!this.checking && (!this.timer || this.timerAt > due)) this.arm(due - since);
  }

  /** The child holds nothing now. */
  idle(): void {
    // Left armed, not holding the process up: clearing it and arming another for the next
    // statement cost two timer-list updates per call, on the call's path (issue 31). Firing
    // with nothing sent, it only goes.
    this.timer?.unref();
  }

  /** The child was let go: its deadline goes with it. */
  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Arms the timer to fire in `ms`, replacing the one armed. */
  private arm(ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.fire(), ms);
    this.timerAt = Date.now() + ms;
  }

  private fire(read = false): void {
    this.timer = undefined;
    this.checking = false;
    const head = this.holder.head();
    if (!head) return;
    const left = head.since + this.limitOf(head.req) - Date.now();
    if (left > 0) {
      // The head changed since the timer was armed: wait out the current one's deadline.
      this.arm(left);
      return;
    }
    const running = this.holder.runningBehind();
    if (running) {
      // That one's deadline counts.
      const rest = running.since + this.limitOf(running.req) - Date.now();
      if (rest > 0) {
        this.arm(rest);
        return;
      }
    }
    if (!read) {
      // Timers run before I/O in each turn of the event loop: after the worker's loop stalled
      // (a long synchronous task, a GC pause), an answer that came within the deadline can sit
      // unread in the channel when the timer fires. setImmediate runs after this turn's I/O,
      // so the child is killed only if its answer is truly not there.
      this.checking = true;
      setImmediate(() => this.fire(true));
      return;
    }
    this.holder.expired();
  }
}
