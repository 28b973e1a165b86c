// ExecutorPool binds database lines to children (which line runs on which child, when a line
// gives its child up, a database closed in every child before a restore). What stands apart
// has a file: line-turns.ts (which waiting line an idle child takes), pool-places.ts (the
// children and the spare), shard-evictions.ts, database-lines.ts, executor-status.ts (issue
// 26), overflow-lane.ts (which statements the lane takes, issue 27), lane-dispatch.ts (when the
// lane's children are given out), every-child.ts.

import type { ExecOutcome, ExecRequest } from './executor-protocol.ts';
import { DatabaseLines, type Line } from './database-lines.ts';
import { failure } from './death-answers.ts';
import { checkPoolOptions, type ExecutorPoolOptions } from './executor-options.ts';
import { MAX_PIPELINE, type ExecutorProcess, type Queued } from './executor-process.ts';
import { about, type PoolStatus } from './executor-status.ts';
import { answerForDead, closeEverywhere, evictEverywhere, statsEverywhere } from './every-child.ts';
import { LaneDispatch } from './lane-dispatch.ts';
import { OverflowLane } from './overflow-lane.ts';
import { LineTurns } from './line-turns.ts';
import { PoolPlaces } from './pool-places.ts';
import { ShardEvictions } from './shard-evictions.ts';

export type { ExecutorPoolOptions };

/** EXECUTOR_LONG_MS's default, for pools made without it. */
const LONG_MS = 250;

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
 * it. Which waiting line an idle child takes, within each workspace's share of children, is
 * `LineTurns`'s to say.
 *
 * Beyond the `size` pooled children, `overflow` more (the overflow lane, see `OverflowLane`)
 * run one statement at a time, only while every pooled child runs a statement past `longMs`,
 * and only a statement its workspace ran before and saw finish under `longMs`: so a quiet
 * workspace's usual read is served within `longMs` while runaways hold every pooled child,
 * without killing any statement before its deadline. A workspace that holds a child takes none
 * there either.
 */
export class ExecutorPool {
  /** The pooled children, then the overflow lane's, and the spare. */
  private readonly places: PoolPlaces;
  private readonly lane: OverflowLane;
  private readonly laneDispatch: LaneDispatch;
  private readonly bound: (Line | undefined)[];
  private readonly lines: DatabaseLines;
  /** The lines waiting for a child, and whose turn it is. */
  private readonly turns: LineTurns;
  private readonly evictions: ShardEvictions;
  private readonly trace: boolean;
  private stopped = false;

  /** @throws RangeError when an option is out of range (see `checkPoolOptions`). */
  constructor(private readonly opts: ExecutorPoolOptions) {
    const overflow = opts.overflow ?? 0;
    const longMs = opts.longMs ?? LONG_MS;
    checkPoolOptions(opts, overflow, longMs);
    const hooks = {
      progress: (p: ExecutorProcess) => this.onProgress(p),
      returned: (p: ExecutorProcess, items: Queued[]) => this.onReturned(p, items),
      ran: (p: ExecutorProcess, req: ExecRequest, ms: number) => {
        const line = this.bound[p.index];
        if (line) this.lane.ran(line.workspace, req, ms);
      },
    };
    this.turns = new LineTurns(opts);
    this.lane = new OverflowLane(longMs);
    this.places = new PoolPlaces(opts, overflow, hooks);
    this.bound = this.places.all.map(() => undefined);
    this.laneDispatch = new LaneDispatch(this.places, this.turns, this.lane, longMs, this.bound, (line, slot) => this.bind(line, slot, true));
    // Every handle open anywhere fits, twice over.
    this.lines = new DatabaseLines(opts.size * opts.handleCacheSize * 2);
    this.evictions = new ShardEvictions(this.lines);
    this.trace = opts.logger?.isLevelEnabled?.('trace') ?? false;
  }

  /**
   * Starts every child (and a spare, in the background).
   * @throws Error when one cannot start, `START_ATTEMPTS` times in a row.
   */
  start(): Promise<void> {
    return this.places.start();
  }

  /** The pids of the children running now. */
  get pids(): number[] {
    return this.places.pids;
  }

  /**
   * Runs one request. Resolves with an outcome for every agent error, timeout and child crash;
   * never rejects. `evict` reaches every child.
   */
  run(req: ExecRequest): Promise<ExecOutcome> {
    if (this.stopped) return Promise.resolve(failure('UNAVAILABLE', 'the executor is stopped'));
    if (req.op === 'evict') return this.evict(req.shards);
    if (req.op === 'stats') return statsEverywhere(this.places.all);
    if (req.op === 'close') return closeEverywhere(this.places.all, req.path);
    if (this.places.broken) return Promise.resolve(this.places.cannotStart());
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
      if (this.turns.has(line)) return;
      // An idle child gets the statement at once: deferring it would let the worker's other
      // pending work (BullMQ's next fetch, a socket write of ~40 µs) go first, on every call.
      const slot = this.turns.size === 0 && this.turns.underShare(line) ? this.places.idleFor(line.path) : undefined;
      if (slot) return this.bind(line, slot, false);
      this.turns.add(line);
      this.dispatch();
    });
  }

  /**
   * How long (s) the oldest commit that history capture lacks has waited in its WAL, over every
   * database this pool's children have open; 0 when history holds every commit. Grows while a
   * database's copies fail (a full history volume) until one works (see `HistoryCapture`).
   */
  captureLagSeconds(now = Date.now()): number {
    return this.places.captureLagSeconds(now);
  }

  /** What every child is doing. */
  status(): PoolStatus {
    return this.places.status(this.lines.waiting());
  }

  /**
   * Lets the statements already sent finish, answers the waiting ones UNAVAILABLE, and ends the
   * children (each closes its handles, checkpointing each WAL).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.laneDispatch.stop();
    for (const item of this.lines.takeWaiting()) item.resolve(failure('UNAVAILABLE', 'the executor stopped'));
    this.turns.clear();
    await this.places.stop();
  }

  private dispatch(): void {
    for (const slot of this.places.pooled) {
      if (this.turns.size === 0) return;
      if (!slot.available || this.bound[slot.index]) continue;
      const line = this.turns.next(slot);
      if (!line) break;
      this.bind(line, slot, true);
    }
    if (this.places.lane.length) this.laneDispatch.dispatch();
  }

  private bind(line: Line, slot: ExecutorProcess, waited: boolean): void {
    line.slot = slot;
    line.skips = 0;
    line.boundAt = Date.now();
    line.spentAtBind = slot.spentMs;
    line.statementsAtBind = slot.statements;
    this.bound[slot.index] = line;
    this.turns.took(line, line.boundAt, waited);
    this.feed(line);
  }

  /** Gives the line's child up; a line with statements left waits at the back. */
  private release(line: Line): void {
    const slot = line.slot!;
    line.slot = undefined;
    this.bound[slot.index] = undefined;
    const now = Date.now();
    const spentMs = slot.spentMs - line.spentAtBind;
    this.turns.gave(line, now, spentMs, slot.statements - line.statementsAtBind);
    if (this.places.inLane(slot)) this.opts.metrics?.executorOverflow?.inc({ ran: this.lane.laneRan(line.workspace, spentMs, now) });
    if (line.queue.length) this.turns.add(line);
    else this.evictions.check();
  }

  /** Sends the line's next statements to its child, while the pipeline has room. */
  private feed(line: Line): void {
    const slot = line.slot;
    if (!slot?.ready || line.queue.length === 0) return;
    // Another line waits: finish what was sent, then give the child up (onProgress); one
    // statement at a time meanwhile, so what another waits behind is one statement, not a
    // pipeline of slow ones each just under the deadline.
    // A lane child runs one statement, then goes back to the lane (see `onProgress`).
    const othersWait = this.places.inLane(slot) || this.turns.othersWait(line);
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
      if (slot.inFlight > 0 || (line.queue.length > 0 && !this.places.inLane(slot) && !this.turns.othersWait(line))) return this.feed(line);
      this.release(line);
    }
    if (slot.broken && this.places.broken) {
      // No child can start: answer what waits rather than hold it until one does.
      for (const waiting of this.turns.clear()) for (const item of waiting.queue.splice(0)) item.resolve(this.places.cannotStart());
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
    const statements = answerForDead(items);
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
    if (this.lines.busyIn(shards)) await this.evictions.wait(shards);
    return evictEverywhere(this.places.all, shards);
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
    void closeEverywhere(this.places.all, line.path).then(() => {
      line.closing = false;
      line.closedFor = item;
      if (line.slot) this.feed(line);
      else this.dispatch();
    });
  }
}
