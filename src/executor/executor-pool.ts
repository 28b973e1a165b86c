// One file on purpose, past 300 lines: ExecutorPool is one scheduler (which database's line runs
// on which child, when a line gives its child up, each workspace's share, a database closed in
// every child before a restore), and every method reads and changes the same lines and slots.
// What stands apart already has a file: database-lines.ts, workspace-usage.ts, spare-child.ts,
// executor-status.ts (issue 26), overflow-lane.ts (which statements the lane takes, issue 27),
// every-child.ts (an evict, close or stats sent to every child and added up).

import type { ErrorCode } from '../errors.ts';
import type { ExecOutcome, ExecRequest } from './executor-protocol.ts';
import { DatabaseLines, type Line } from './database-lines.ts';
import type { ExecutorPoolOptions } from './executor-options.ts';
import { START_ATTEMPTS } from './child-succession.ts';
import { ExecutorProcess, MAX_PIPELINE, type Queued } from './executor-process.ts';
import { about, type PoolStatus } from './executor-status.ts';
import { closeEverywhere, evictEverywhere, statsEverywhere } from './every-child.ts';
import { laneOpens, OverflowLane } from './overflow-lane.ts';
import { SpareChild } from './spare-child.ts';
import { fairest, tier, WorkspaceUsage, type Aging } from './workspace-usage.ts';

export type { ExecutorPoolOptions };

/** How far into the waiting databases a busy line looks for one that could take its child. */
const PREFER_SCAN = 64;
/** EXECUTOR_LONG_MS's default, for pools made without it. */
const LONG_MS = 250;

const failure = (code: ErrorCode, detail: string): ExecOutcome => ({ ok: false, error: { code, detail } });

/** A request that replaces its database's file: no child may have it open when it runs. */
const replacesFile = (req: ExecRequest): boolean => req.op === 'restore' && req.dryRun !== true;

/**
 * A worker's SQLite executors: a pool of child processes, so that one database's slow statement
 * holds up only that database, and a worker uses every core.
 *
 * Each database is a line of statements. A line runs on one child at a time, in order (one
 * writer per database, and the order calls reached the executor is the order they commit);
 * different lines run on different children at once. While a line has a child it keeps it and
 * its statements are pipelined to it (what made one child fast: a round trip per statement
 * would cap a worker at a few thousand calls a second) — until another line waits, then it
 * finishes what it sent and gives the child up (a line that takes a child while others wait
 * sends one statement). Statements handed back by a killed child wait behind the lines already
 * waiting, so a runaway costs the others one deadline, not one per statement queued behind
 * it. A workspace holds at most `workspaceShare` children at once: its other lines wait, and
 * others find a child free. An idle child takes the next turn of the round-robin over waiting
 * workspaces (see `WorkspaceUsage` and `fairest`): one holding no child before one holding a
 * child, so none takes a second while another waits; a workspace of known cheap statements
 * before the rest, so a quiet workspace's read waits for the next free child, not behind a burst
 * of fresh workspaces' runaways (twenty of them held one for 100 s under the former
 * least-recent-executor-time rule, to which a fresh workspace looked as light as a quiet one);
 * and, once cheap ones have taken every child in a row, one line at a time that waited a whole
 * deadline before all, so cheap ones cannot starve the rest.
 * It prefers a line it ran last, when that one's turn is about as near (a reopen costs a file
 * open, WAL set-up and every statement prepared again), but passes the first at most `size`
 * times.
 *
 * Beyond the `size` pooled children, `overflow` more (the overflow lane, see `OverflowLane`)
 * run one statement at a time, only while every pooled child runs a statement past `longMs`,
 * and only a statement its workspace ran before and saw finish under `longMs`: so a quiet
 * workspace's usual read is served within `longMs` while runaways hold every pooled child,
 * without killing any statement before its deadline. A workspace that holds a child takes none
 * there either.
 */
export class ExecutorPool {
  /** The pooled children, then the overflow lane's. */
  private readonly slots: ExecutorProcess[];
  private readonly pooled: ExecutorProcess[];
  private readonly laneSlots: ExecutorProcess[];
  private readonly lane: OverflowLane;
  private readonly longMs: number;
  /** Armed while lines wait and the lane would open once the pooled children's statements pass `longMs`. */
  private laneTimer?: NodeJS.Timeout;
  private readonly spare: SpareChild;
  private readonly bound: (Line | undefined)[];
  private readonly lines: DatabaseLines;
  /** Lines with statements and no child, oldest first. */
  private ready = new Set<Line>();
  private readonly usage: WorkspaceUsage;
  /** Lines holding a child they took ahead of cheap ones for their long wait: at most one. */
  private promoted = 0;
  /** Children given to lines of cheap workspaces in a row, from the waiting ones. */
  private cheapStreak = 0;
  private readonly evicting: { shards: number[]; done: () => void }[] = [];
  private readonly trace: boolean;
  private stopped = false;

  constructor(private readonly opts: ExecutorPoolOptions) {
    // These end up in a shell command line and a setTimeout; config validated them, this keeps
    // any other caller honest.
    for (const key of ['statementTimeoutMs', 'heapLimitMb', 'handleCacheSize', 'maxResultBytes', 'size', 'workspaceShare'] as const) {
      if (!Number.isSafeInteger(opts[key]) || opts[key] < 1) throw new RangeError(`${key} must be a positive integer, got ${opts[key]}`);
    }
    const overflow = opts.overflow ?? 0;
    if (!Number.isSafeInteger(overflow) || overflow < 0) throw new RangeError(`overflow must be a non-negative integer, got ${overflow}`);
    this.longMs = opts.longMs ?? LONG_MS;
    if (!Number.isSafeInteger(this.longMs) || this.longMs < 1) throw new RangeError(`longMs must be a positive integer, got ${this.longMs}`);
    const { dataDir, heapLimitMb, handleCacheSize, maxResultBytes, maxOffloadBytes, statementCacheBytes, history } = opts;
    this.spare = new SpareChild(
      { dataDir, heapLimitMb, handleCacheSize, maxResultBytes, maxOffloadBytes, statementCacheBytes, history },
      opts.logger,
      opts.child,
    );
    const hooks = {
      progress: (p: ExecutorProcess) => this.onProgress(p),
      returned: (p: ExecutorProcess, items: Queued[]) => this.onReturned(p, items),
      spare: () => this.spare.take(),
      ran: (p: ExecutorProcess, req: ExecRequest, ms: number) => {
        const line = this.bound[p.index];
        if (line) this.lane.ran(line.workspace, req, ms);
      },
    };
    this.usage = new WorkspaceUsage(opts.statementTimeoutMs);
    this.lane = new OverflowLane(this.longMs);
    this.slots = Array.from({ length: opts.size + overflow }, (_, i) => new ExecutorProcess(i, opts, hooks));
    this.pooled = this.slots.slice(0, opts.size);
    this.laneSlots = this.slots.slice(opts.size);
    this.bound = this.slots.map(() => undefined);
    // Every handle open anywhere fits, twice over.
    this.lines = new DatabaseLines(opts.size * opts.handleCacheSize * 2);
    this.trace = opts.logger?.isLevelEnabled?.('trace') ?? false;
  }

  /**
   * Starts every child (and a spare, in the background).
   * @throws Error when one cannot start, `START_ATTEMPTS` times in a row.
   */
  async start(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.start()));
    this.spare.start();
  }

  /** The pids of the children running now. */
  get pids(): number[] {
    return this.slots.flatMap((s) => (s.pid === undefined ? [] : [s.pid]));
  }

  /**
   * Runs one request. Resolves with an outcome for every agent error, timeout and child crash;
   * never rejects. `evict` reaches every child.
   */
  run(req: ExecRequest): Promise<ExecOutcome> {
    if (this.stopped) return Promise.resolve(failure('UNAVAILABLE', 'the executor is stopped'));
    if (req.op === 'evict') return this.evict(req.shards);
    if (req.op === 'stats') return statsEverywhere(this.slots);
    if (req.op === 'close') return closeEverywhere(this.slots, req.path);
    if (this.slots.every((s) => s.broken)) return Promise.resolve(this.cannotStart());
    return new Promise((resolve) => {
      const line = this.lines.get(req.db);
      line.queue.push({ req, resolve });
      if (this.trace) this.opts.logger!.trace!(about(req), 'statement received');
      if (line.slot) {
        // Pipelined behind what its child runs; statements arriving in the same tick travel in
        // one message.
        if (!line.feeding) {
          line.feeding = true;
          queueMicrotask(() => {
            line.feeding = false;
            this.feed(line);
          });
        }
        return;
      }
      if (this.ready.has(line)) return;
      // An idle child gets the statement at once: deferring it would let the worker's other
      // pending work (BullMQ's next fetch, a socket write of ~40 µs) go first, on every call.
      const slot = this.ready.size === 0 && this.underShare(line) ? this.slotFor(line) : undefined;
      if (slot) return this.bind(line, slot, false);
      this.wait(line);
      this.dispatch();
    });
  }

  /**
   * How long (s) the oldest commit that history capture lacks has waited in its WAL, over every
   * database this pool's children have open; 0 when history holds every commit. Grows while a
   * database's copies fail (a full history volume) until one works (see `HistoryCapture`).
   */
  captureLagSeconds(now = Date.now()): number {
    let oldest: number | undefined;
    for (const s of this.slots)
      if (s.captureBehindSince !== undefined && (oldest === undefined || s.captureBehindSince < oldest)) oldest = s.captureBehindSince;
    return oldest === undefined ? 0 : Math.max(0, now - oldest) / 1000;
  }

  /** What every child is doing. */
  status(): PoolStatus {
    const now = Date.now();
    const spare = this.spare.pid;
    const children = this.slots.map((s) => (s.index < this.opts.size ? s.status(now) : { ...s.status(now), overflow: true as const }));
    const overflow = this.laneSlots.length;
    return {
      size: this.opts.size,
      workspaceShare: this.opts.workspaceShare,
      waiting: this.lines.waiting(),
      children,
      ...(overflow ? { overflow } : {}),
      ...(spare ? { spare } : {}),
    };
  }

  /**
   * Lets the statements already sent finish, answers the waiting ones UNAVAILABLE, and ends the
   * children (each closes its handles, checkpointing each WAL).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.laneTimer);
    for (const item of this.lines.takeWaiting()) item.resolve(failure('UNAVAILABLE', 'the executor stopped'));
    this.clearWaiting();
    await Promise.all([...this.slots.map((s) => s.stop()), this.spare.stop()]);
  }

  private underShare(line: Line): boolean {
    return this.usage.holding(line.workspace) < this.opts.workspaceShare;
  }

  /**
   * Whether a waiting line could take `line`'s child if it gave it up: one under its share, or
   * one of the same workspace (whose share that child would free). Lines held back by their
   * workspace's share do not count, or a busy line would stop for nothing.
   */
  private othersWait(line: Line): boolean {
    if (this.ready.size === 0) return false;
    let scanned = 0;
    for (const other of this.ready) {
      if (other.workspace === line.workspace || this.underShare(other)) return true;
      if (++scanned >= PREFER_SCAN) return true;
    }
    return false;
  }

  /** The idle child for `line`: one that has it open, else the one idle longest. */
  private slotFor(line: Line): ExecutorProcess | undefined {
    let best: ExecutorProcess | undefined;
    for (const slot of this.pooled) {
      if (!slot.available) continue;
      if (slot.recent.has(line.path)) return slot;
      if (!best || slot.idleSince < best.idleSince) best = slot;
    }
    return best;
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

  private dispatch(): void {
    for (const slot of this.pooled) {
      if (this.ready.size === 0) return;
      if (!slot.available || this.bound[slot.index]) continue;
      // A long waiter goes ahead only once cheap ones took every child in a row: they keep all
      // of them busy. Sooner, it took the child a quiet read was about to get, in every burst.
      const open = this.promoted === 0 && this.cheapStreak >= this.opts.size;
      const aging: Aging = { now: Date.now(), afterMs: this.opts.statementTimeoutMs, open };
      const line = this.pickFor(slot, aging);
      if (!line) break;
      this.ready.delete(line);
      const picked = tier(line, this.usage.standing(line.workspace), aging);
      this.cheapStreak = picked === 1 ? this.cheapStreak + 1 : 0;
      if (picked === 0) {
        line.promoted = true;
        this.promoted++;
      }
      this.bind(line, slot, true);
    }
    if (this.laneSlots.length) this.dispatchLane();
  }

  /**
   * Gives the lane's idle children to waiting lines it admits, while every pooled child runs a
   * long statement; otherwise arms a timer for when they all will have, if lines still wait.
   */
  private dispatchLane(): void {
    clearTimeout(this.laneTimer);
    this.laneTimer = undefined;
    if (this.ready.size === 0) return;
    const now = Date.now();
    const state = laneOpens(
      this.pooled.map((s) => (s.ready ? s.headRunningMs(now) : 'down')),
      this.longMs,
    );
    if (!state.open) {
      if (state.inMs !== undefined) this.laneTimer = setTimeout(() => this.dispatchLane(), state.inMs).unref();
      return;
    }
    for (const slot of this.laneSlots) {
      if (!slot.available || this.bound[slot.index]) continue;
      const line = this.pickForLane(now);
      if (!line) return;
      this.ready.delete(line);
      this.bind(line, slot, true);
    }
  }

  /** The waiting line the lane takes: one it admits whose workspace's turn starts first, the oldest of equals. */
  private pickForLane(now: number): Line | undefined {
    let best: Line | undefined;
    let bestStart = Number.POSITIVE_INFINITY;
    for (const line of this.ready) {
      const head = line.queue[0];
      if (!head || line.closing || this.usage.holding(line.workspace) > 0) continue;
      const standing = this.usage.standing(line.workspace);
      if (!standing.cheap || standing.start >= bestStart || !this.lane.admits(line.workspace, head.req, now)) continue;
      best = line;
      bestStart = standing.start;
    }
    return best;
  }

  private inLane(slot: ExecutorProcess): boolean {
    return slot.index >= this.opts.size;
  }

  /** `line` waits for a child, behind those already waiting. */
  private wait(line: Line): void {
    if (this.ready.has(line)) return;
    this.ready.add(line);
    line.since = Date.now();
    this.usage.waits(line.workspace, line.since);
  }

  /** Nothing waits any more: what waited was answered without running. */
  private clearWaiting(): void {
    for (const line of this.ready) this.usage.leaves(line.workspace);
    this.ready.clear();
  }

  private bind(line: Line, slot: ExecutorProcess, waited: boolean): void {
    line.slot = slot;
    line.skips = 0;
    line.boundAt = Date.now();
    line.spentAtBind = slot.spentMs;
    line.statementsAtBind = slot.statements;
    this.bound[slot.index] = line;
    this.usage.take(line.workspace, line.boundAt, waited);
    this.feed(line);
  }

  /** Gives the line's child up; a line with statements left waits at the back. */
  private release(line: Line): void {
    const slot = line.slot!;
    line.slot = undefined;
    this.bound[slot.index] = undefined;
    if (line.promoted) {
      line.promoted = false;
      this.promoted--;
    }
    const now = Date.now();
    const spentMs = slot.spentMs - line.spentAtBind;
    this.usage.give(line.workspace, now, spentMs, slot.statements - line.statementsAtBind);
    if (this.inLane(slot)) this.opts.metrics?.executorOverflow?.inc({ ran: this.lane.laneRan(line.workspace, spentMs, now) });
    if (line.queue.length) this.wait(line);
    else if (this.evicting.length) this.checkEvictions();
  }

  /** Sends the line's next statements to its child, while the pipeline has room. */
  private feed(line: Line): void {
    const slot = line.slot;
    if (!slot?.ready || line.queue.length === 0) return;
    // Another line waits: finish what was sent, then give the child up (onProgress); one
    // statement at a time meanwhile, so what another waits behind is one statement, not a
    // pipeline of slow ones each just under the deadline.
    // A lane child runs one statement, then goes back to the lane (see `onProgress`).
    const othersWait = this.inLane(slot) || this.othersWait(line);
    if (slot.inFlight > 0 && othersWait) return;
    let room = othersWait ? 1 : MAX_PIPELINE - slot.inFlight;
    if (room <= 0) return;
    // A restore in place goes only once no child has the database open (see `closeFor`); what
    // came before it goes now.
    const stop = line.queue.findIndex((item, i) => i < room && replacesFile(item.req) && line.closedFor !== item);
    if (stop === 0) {
      this.closeFor(line, line.queue[0]!);
      // Nothing of this line runs until every child has answered: its child serves others
      // meanwhile (kept bound and idle, it would look free to the next line that arrives).
      if (slot.inFlight === 0) {
        this.release(line);
        queueMicrotask(() => this.dispatch());
      }
      return;
    }
    if (stop > 0) room = stop;
    const batch = line.queue.length <= room ? line.queue.splice(0) : line.queue.splice(0, room);
    const reopen = line.lastChild !== slot.childId;
    line.lastChild = slot.childId;
    slot.send(batch, reopen);
  }

  private onProgress(slot: ExecutorProcess): void {
    if (this.stopped) return;
    const line = this.bound[slot.index];
    if (line) {
      if (slot.inFlight > 0 || (line.queue.length > 0 && !this.inLane(slot) && !this.othersWait(line))) return this.feed(line);
      this.release(line);
    }
    if (slot.broken && this.slots.every((s) => s.broken)) {
      // No child can start: answer what waits rather than hold it until one does.
      for (const waiting of this.ready) for (const item of waiting.queue.splice(0)) item.resolve(this.cannotStart());
      this.clearWaiting();
    }
    this.dispatch();
  }

  /**
   * A child was killed or died: what it never started goes to another child, behind the lines
   * already waiting. Not ahead of them: that line just had a whole deadline of a child, and at
   * the front it took the next free child again and again — a workspace of like load waited for
   * another's whole backlog of runaways (backlog × timeout), not for one.
   */
  private onReturned(slot: ExecutorProcess, items: Queued[]): void {
    const line = this.bound[slot.index];
    const statements: Queued[] = [];
    for (const item of items) {
      // Its handles died with it: nothing left there to evict.
      if (item.req.op === 'evict' || item.req.op === 'close') item.resolve({ ok: true, result: { closed: 0 } });
      else if (item.req.op === 'stats') item.resolve({ ok: true, result: { handles: 0, statements: { count: 0, bytes: 0, budget: 0 }, rss: 0 } });
      else statements.push(item);
    }
    if (line) {
      line.queue.unshift(...statements);
      if (this.stopped) for (const item of line.queue.splice(0)) item.resolve(failure('UNAVAILABLE', 'the executor stopped'));
      this.release(line);
    }
    if (!this.stopped) this.dispatch();
  }

  /**
   * Closes the handles of these shards in every child, once their statements in hand are done
   * (as with one child, where the evict waited its turn behind them).
   */
  private async evict(shards: number[]): Promise<ExecOutcome> {
    if (this.lines.busyIn(shards)) await new Promise<void>((done) => this.evicting.push({ shards, done }));
    return evictEverywhere(this.slots, shards);
  }

  /**
   * Closes the database of `line` in every child before `item`, a restore in place, runs: the
   * restore replaces the file by renaming, and a connection left open on it anywhere would go
   * on with the old file under names (-wal, -shm) the new one uses. Its line runs nothing else
   * meanwhile, so once every child has answered none has it open, whichever child then runs the
   * restore (that child reopens it, and closes it again itself before the rename).
   */
  private closeFor(line: Line, item: Queued): void {
    if (line.closing) return;
    line.closing = true;
    void closeEverywhere(this.slots, line.path).then(() => {
      line.closing = false;
      line.closedFor = item;
      if (line.slot) this.feed(line);
      else this.dispatch();
    });
  }

  private checkEvictions(): void {
    for (const waiting of [...this.evicting]) {
      if (this.lines.busyIn(waiting.shards)) continue;
      this.evicting.splice(this.evicting.indexOf(waiting), 1);
      waiting.done();
    }
  }

  /**
   * What a request gets while no child can start: UNAVAILABLE, unsettled, so its job is run again
   * (BullMQ's retry) rather than answered — nothing ran, and a call answered INTERNAL kept that
   * answer under its id (a storm of children killed while they started gave 296 writes it).
   */
  private cannotStart(): ExecOutcome {
    const why = this.slots.find((s) => s.lastError)?.lastError ?? 'no child is running';
    return {
      ok: false,
      error: { code: 'UNAVAILABLE', detail: `the database process could not start (${START_ATTEMPTS} tries in a row): ${why}` },
      unsettled: true,
    };
  }
}
