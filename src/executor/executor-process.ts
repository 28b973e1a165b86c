// ExecutorProcess is what one place sends its child and what becomes of it (send, answers, kill,
// death), each step reading and changing the same private state (sent). What stands apart has
// a file: child-succession.ts (the child in place: start, replace, end), head-deadline.ts (when
// the running statement is past its limit), executor-spawn.ts, executor-status.ts,
// handle-mirror.ts (issue 26), death-answers.ts (what answers the requests a dead child had),
// child-loss.ts (what the kill at a deadline and a death share).

import type { ChildProcess } from 'node:child_process';
import type { ChildMessage, ChildRequest, ExecOutcome, ExecRequest } from './executor-protocol.ts';
import { ChildSuccession } from './child-succession.ts';
import { diedOnItsOwn, killedAtDeadline, type LossLog } from './child-loss.ts';
import type { ExecutorProcessOptions } from './executor-options.ts';
import { HandleMirror } from './handle-mirror.ts';
import { HeadDeadline, type Timed } from './head-deadline.ts';
import { about, type ChildStatus } from './executor-status.ts';
import { StatementMarks } from './statement-marks.ts';
import { SentTargets } from './target-refs.ts';

/** A request on its way through the pool, until it is answered. */
export interface Queued {
  req: ExecRequest;
  resolve: (outcome: ExecOutcome) => void;
}

/** What a child tells its pool. */
export interface ProcessHooks {
  /** Something it was sent was answered, or a (new) child became ready or could not start. */
  progress(p: ExecutorProcess): void;
  /** Requests sent but never started, handed back in order after a kill or a crash. */
  returned(p: ExecutorProcess, items: Queued[]): void;
  /** A child started ahead of need (ready, no listeners), to replace a dead one at once. */
  spare(): ChildProcess | undefined;
  /** A statement ended (answered, or killed or dead mid-statement) after `ms` of executor time. */
  ran?(p: ExecutorProcess, req: ExecRequest, ms: number): void;
}

/** Requests written to a child ahead of their turn; bounds what one kill sends back. */
export const MAX_PIPELINE = 64;

/**
 * One place in a worker's executor pool, and the child process that fills it: it writes
 * requests to the child (pipelined: the child runs them strictly in order), times the head of
 * the line, and replaces the child when it is killed or dies.
 *
 * Past `statementTimeoutMs` the child is SIGKILLed: the head answers STATEMENT_TIMEOUT, and the
 * requests behind it — which never started — go back to the pool, which gives them to another
 * child. WAL makes the kill safe. A child that dies on its own mid-statement (out of memory)
 * answers RESOURCE_LIMIT, which is not retried into another crash; one SIGKILLed from outside
 * answers UNAVAILABLE (see `diedOnItsOwn`). Either way the pool's spare
 * takes its place at once (or a new child is started), and nothing else in the worker stops.
 *
 * A write or drop whose child died (or was killed at its deadline) before answering may still
 * have committed: it is answered by its exactly-once record, read on another child, not by the
 * failure (a tester's SIGKILL a few ms after a 20,000-row insert committed answered
 * RESOURCE_LIMIT, and the caller could never learn the rows were there). The child marks each
 * request as it starts it (see `StatementMarks`): only the one it was running answers for its
 * death; one it never started goes to another child, and one it had finished (its answer lost
 * with it) runs again there, as if nothing had happened to either.
 */
export class ExecutorProcess {
  /** The child in place, and those that replace it. */
  private readonly children: ChildSuccession;
  private sent: { id: number; item: Queued }[] = [];
  private headSince = 0;
  private readonly deadline: HeadDeadline;
  private nextId = 1;
  /** Which request the child started last, and whether it finished (its marks file). */
  private marks?: StatementMarks;
  private readonly whenIdle: (() => void)[] = [];
  /** Databases this child ran lately: what its handle cache probably holds. */
  readonly recent: HandleMirror;
  /** The databases' targets the child in place was sent whole, and the numbers it keeps them under. */
  private readonly targets = new SentTargets();
  /**
   * Executor time its children spent, in ms: the CPU each statement took, as the child reports
   * it, and the whole deadline for one killed or dead mid-statement. The pool charges a
   * workspace the difference over the time its line held this place.
   */
  spentMs = 0;
  /** Statements its children answered or were killed in: what `spentMs` was spent on. */
  statements = 0;
  /** Since when it has had nothing to do; the pool gives new work to the longest idle. */
  idleSince = 0;
  /**
   * Since when (ms) the oldest commit its child's history capture lacks has waited, as the
   * child last said with its outcomes; undefined when none, or when the child was replaced (the
   * next one copies the WAL as it opens the database, and says so if that fails too).
   */
  captureBehindSince: number | undefined;

  constructor(
    readonly index: number,
    private readonly opts: ExecutorProcessOptions,
    private readonly hooks: ProcessHooks,
  ) {
    this.recent = new HandleMirror(opts.handleCacheSize);
    this.children = new ChildSuccession(index, opts, {
      adopted: (child, now) => this.adopted(child, now),
      released: () => this.released(),
      progress: () => hooks.progress(this),
      spare: () => hooks.spare(),
    });
    this.deadline = new HeadDeadline(opts.statementTimeoutMs, {
      head: () => this.timedHead(),
      runningBehind: () => this.runningBehind(),
      expired: () => this.expired(),
    });
  }

  /**
   * Starts the child; resolves once one listens, trying again after a failed start.
   * @throws Error when `START_ATTEMPTS` starts in a row fail.
   */
  start(): Promise<void> {
    return this.children.start();
  }

  /** Unique per child started (in this process): tells a pool whether a handle may be stale. */
  get childId(): number {
    return this.children.childId;
  }

  get pid(): number | undefined {
    return this.children.child?.pid;
  }

  /** Ready, with nothing in hand: may be given a database. */
  get available(): boolean {
    return this.children.state === 'ready' && this.sent.length === 0;
  }

  get ready(): boolean {
    return this.children.state === 'ready';
  }

  /** No child could start lately (see `ChildSuccession.broken`): what waits for it is answered rather than held. */
  get broken(): boolean {
    return this.children.broken;
  }

  /** Why it could not start, while down. */
  get lastError(): string {
    return this.children.lastError;
  }

  /** Requests written and not yet answered. */
  get inFlight(): number {
    return this.sent.length;
  }

  /** How long the statement at the head has run (ms), undefined while none runs. */
  headRunningMs(now = Date.now()): number | undefined {
    return this.sent.length ? now - this.headSince : undefined;
  }

  /**
   * Writes requests to the child, behind what it has; `reopen` asks it to reopen the first
   * one's database. Only while ready.
   */
  send(items: Queued[], reopen = false): void {
    const child = this.children.child!;
    const now = Date.now();
    if (this.sent.length === 0) this.headSince = now;
    this.deadline.sent(this.sent[0]?.item.req ?? items[0]!.req, now);
    const message: ChildRequest[] = [];
    for (const item of items) {
      const id = this.nextId++;
      this.sent.push({ id, item });
      const req = item.req;
      message.push(this.targets.message(id, req, reopen && message.length === 0));
      if (req.op !== 'evict' && req.op !== 'stats' && req.op !== 'close') this.recent.touch(req.db.path, req.db.shard);
    }
    child.channel?.ref();
    child.send(message, (err) => {
      if (!err || this.children.child !== child) return;
      // The channel broke: the child is useless. What it did not answer goes to another child
      // (a write that did run is replayed from its recorded call id, not run twice).
      const unanswered = this.sent.splice(0).map((s) => s.item);
      this.children.replace(child, 'could not send to the child');
      this.handBack(unanswered);
    });
  }

  /** What it is doing now. */
  status(now = Date.now()): ChildStatus {
    const state = this.children.state === 'ready' ? (this.sent.length ? 'running' : 'idle') : this.children.state;
    const head = this.sent[0]?.item.req;
    if (!head) return { child: this.index, pid: this.pid, state };
    return {
      child: this.index,
      pid: this.pid,
      state,
      ...about(head),
      runningMs: now - this.headSince,
      behind: this.sent.length - 1,
    };
  }

  /** Lets what was sent finish, then ends the child (it closes its handles, checkpointing). */
  stop(): Promise<void> {
    const drained = this.sent.length ? new Promise<void>((resolve) => this.whenIdle.push(resolve)) : undefined;
    return this.children.stop(drained);
  }

  private onOutcomes(child: ChildProcess, message: ChildMessage): void {
    if (child !== this.children.child || message.type !== 'outcomes') return;
    this.captureBehindSince = message.captureBehindSince;
    for (const { id, outcome, cpuUs } of message.outcomes) {
      const head = this.sent[0];
      if (!head || head.id !== id) continue;
      this.sent.shift();
      // Evicts, closes and stats reach every child between lines' statements: not a line's cost.
      if ('db' in head.item.req) this.charge(head.item.req, (cpuUs ?? 0) / 1000);
      else this.spentMs += (cpuUs ?? 0) / 1000;
      head.item.resolve(outcome);
    }
    if (this.sent.length) {
      this.headSince = Date.now();
      this.deadline.next(this.sent[0]!.item.req, this.headSince);
    } else {
      this.deadline.idle();
      this.idleSince = Date.now();
      child.channel?.unref();
      for (const resolve of this.whenIdle.splice(0)) resolve();
    }
    this.hooks.progress(this);
  }

  /** After a kill or crash: the rest go back to the pool, and a stop() waiting for them goes on. */
  private handBack(items: Queued[]): void {
    for (const resolve of this.whenIdle.splice(0)) resolve();
    this.hooks.returned(this, items);
  }

  /** The head of what the child was sent, for its deadline; none while no child is in place. */
  private timedHead(): Timed | undefined {
    const head = this.sent[0];
    return head && this.children.child ? { req: head.item.req, since: this.headSince } : undefined;
  }

  /** The request the child's marks say it runs, when that is not the head (see `DeadlineHolder`). */
  private runningBehind(): Timed | undefined {
    const { running } = this.marks!.sort(this.sent);
    return running && running !== this.sent[0] ? { req: running.item.req, since: this.marks!.startedAt } : undefined;
  }

  /** A statement of a line's ended after `ms` of executor time: its place's, and the pool is told. */
  private charge(req: ExecRequest, ms: number): void {
    this.spentMs += ms;
    this.statements++;
    this.hooks.ran?.(this, req, ms);
  }

  /** The running statement's deadline passed, its answer not in the channel: the child is killed. */
  private expired(): void {
    const head = this.sent[0]!;
    const child = this.children.child!;
    const loss = killedAtDeadline(this.marks!.sort(this.sent.splice(0)), head, (req) => this.deadline.limitOf(req), this.lossLog(child));
    this.charge(loss.running.req, loss.ms);
    this.children.replace(child, 'statement timeout');
    this.handBack(loss.back);
  }

  /** The child is gone (see `diedOnItsOwn`). */
  private onDeath(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    // A child killed at its deadline was replaced first: its death returns here, counted as a timeout.
    if (child !== this.children.child) return;
    const sorted = this.marks!.sort(this.sent.splice(0));
    const loss = diedOnItsOwn(sorted, Date.now() - Math.max(this.headSince, this.marks!.startedAt), code, signal, this.lossLog(child));
    if (loss.running) this.charge(loss.running.req, loss.ms);
    // One that dies while idle, soon after it started, is not replaced in a loop.
    this.children.replace(child, 'it died', !loss.running && this.children.justStarted);
    this.handBack(loss.back);
  }

  private lossLog(child: ChildProcess): LossLog {
    return { opts: this.opts, child: this.index, childPid: child.pid };
  }

  /** The child in place was let go (see `ChildSuccession.replace`): what it said is stale, its deadline moot. */
  private released(): void {
    this.captureBehindSince = undefined;
    this.deadline.clear();
  }

  /** `child` is this place's own (see `ChildSuccession.adopt`): heard from now on. */
  private adopted(child: ChildProcess, now: number): void {
    this.idleSince = now;
    this.recent.clear();
    this.targets.clear();
    this.marks = new StatementMarks(child);
    child.on('message', (message: ChildMessage) => this.onOutcomes(child, message));
    // Channel errors; the worker must never crash on them, and an exit follows.
    child.on('error', (err) => this.opts.logger?.warn({ child: this.index, childPid: child.pid, err: err.message }, 'executor child error'));
    // 'close', not 'exit': it comes after the channel's last message, so an answer written just
    // before the child died is read first (and its request is not run again).
    child.on('close', (code, signal) => this.onDeath(child, code, signal));
  }
}
