// One file on purpose, past 300 lines: ExecutorProcess is one slot's life (send, deadline, kill,
// death, respawn), each step reading and changing the same private state (sent, timer, child).
// What stands apart already has a file: executor-spawn.ts, executor-status.ts, handle-mirror.ts
// (issue 26), death-answers.ts (what answers the requests a dead child had in hand).

import type { ChildProcess } from 'node:child_process';
import type { ChildMessage, ChildRequest, ExecOutcome, ExecRequest } from './executor-protocol.ts';
import { answerAfterDeath, failure, lostAnswers } from './death-answers.ts';
import { endExecutorChild, startExecutorChild } from './executor-spawn.ts';
import type { ExecutorProcessOptions } from './executor-options.ts';
import { HandleMirror } from './handle-mirror.ts';
import { about, type ChildStatus } from './executor-status.ts';
import { StatementMarks } from './statement-marks.ts';

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
/** A child that cannot start (or dies at once) is tried again after this, not in a loop. */
const RESPAWN_BACKOFF_MS = 1000;
/**
 * Starts that may fail in a row before a place counts as unable to start (`broken`). One failed
 * start is no sign of that: children killed while they start (an OOM killer, an operator's
 * `kill`) made a pool answer every call "could not start" at once, though the next child
 * started fine (issue 25). Tried again after 100, 200, 400, 800 ms: a few seconds in all.
 */
export const START_ATTEMPTS = 5;
const startBackoffMs = (failures: number): number => Math.min(RESPAWN_BACKOFF_MS, 100 * 2 ** (failures - 1));
let serial = 0;

/**
 * One place in a worker's executor pool, and the child process that fills it: it writes
 * requests to the child (pipelined: the child runs them strictly in order), times the head of
 * the line, and replaces the child when it is killed or dies.
 *
 * Past `statementTimeoutMs` the child is SIGKILLed: the head answers STATEMENT_TIMEOUT, and the
 * requests behind it — which never started — go back to the pool, which gives them to another
 * child. WAL makes the kill safe. A child that dies on its own mid-statement (out of memory)
 * answers RESOURCE_LIMIT, which is not retried into another crash. Either way the pool's spare
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
  /** Unique per child started (in this process): tells a pool whether a handle may be stale. */
  childId = 0;
  private child?: ChildProcess;
  private state: 'starting' | 'ready' | 'down' | 'stopped' = 'down';
  private sent: { id: number; item: Queued }[] = [];
  private headSince = 0;
  private timer?: NodeJS.Timeout;
  /** When {@link timer} fires (ms since the epoch). */
  private timerAt = 0;
  /** A deadline passed; what the channel holds is read before the child is killed. */
  private checking = false;
  private retry?: NodeJS.Timeout;
  private nextId = 1;
  /** Which request the child started last, and whether it finished (its marks file). */
  private marks?: StatementMarks;
  private spawnedAt = 0;
  private starting?: Promise<void>;
  /** Starts failed in a row; reset by a child that starts. */
  private startFailures = 0;
  /** `start()` callers, told once a child is ready or the place is `broken`. */
  private startWaiters: { resolve: () => void; reject: (err: Error) => void }[] = [];
  private stopping = false;
  /** The pid of the child this one replaces, for the respawn's log line. */
  private replacedPid?: number;
  private readonly whenIdle: (() => void)[] = [];
  /** Databases this child ran lately: what its handle cache probably holds. */
  readonly recent: HandleMirror;
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
  /** Why it could not start, while down. */
  lastError = '';
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
  }

  /**
   * Starts the child; resolves once one listens, trying again after a failed start.
   * @throws Error when {@link START_ATTEMPTS} starts in a row fail.
   */
  start(): Promise<void> {
    const started = new Promise<void>((resolve, reject) => this.startWaiters.push({ resolve, reject }));
    void this.spawn().catch(() => undefined);
    return started;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Ready, with nothing in hand: may be given a database. */
  get available(): boolean {
    return this.state === 'ready' && this.sent.length === 0;
  }

  get ready(): boolean {
    return this.state === 'ready';
  }

  /**
   * Its last {@link START_ATTEMPTS} children could not start (it goes on trying, every second):
   * until one does, what waits for it is answered rather than held.
   */
  get broken(): boolean {
    return this.state !== 'ready' && this.startFailures >= START_ATTEMPTS;
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
    const child = this.child!;
    const now = Date.now();
    if (this.sent.length === 0) this.headSince = now;
    if (!this.checking) {
      // The timer armed for an earlier statement is kept across idle spells (see `onOutcomes`):
      // firing before this one's deadline, it arms itself again for what is left of it. A new
      // one only when there is none, or it would fire too late for a shorter limit.
      const due = now + this.deadlineMs(this.sent[0]?.item.req ?? items[0]!.req);
      if (!this.timer || this.timerAt > due) this.arm(due - now);
      else this.timer.ref();
    }
    const message: ChildRequest[] = [];
    for (const item of items) {
      const id = this.nextId++;
      this.sent.push({ id, item });
      const req = item.req;
      message.push(reopen && message.length === 0 ? { id, req, reopen } : { id, req });
      if (req.op !== 'evict' && req.op !== 'stats' && req.op !== 'close') this.recent.touch(req.db.path, req.db.shard);
    }
    child.channel?.ref();
    child.send(message, (err) => {
      if (!err || this.child !== child) return;
      // The channel broke: the child is useless. What it did not answer goes to another child
      // (a write that did run is replayed from its recorded call id, not run twice).
      const unanswered = this.sent.splice(0).map((s) => s.item);
      this.replace(child, 'could not send to the child');
      this.handBack(unanswered);
    });
  }

  /** What it is doing now. */
  status(now = Date.now()): ChildStatus {
    const state = this.state === 'ready' ? (this.sent.length ? 'running' : 'idle') : this.state;
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
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.sent.length) await new Promise<void>((resolve) => this.whenIdle.push(resolve));
    await this.starting;
    this.state = 'stopped';
    clearTimeout(this.retry);
    const child = this.child;
    this.child = undefined;
    if (child) await endExecutorChild(child);
  }

  private onOutcomes(child: ChildProcess, message: ChildMessage): void {
    if (child !== this.child || message.type !== 'outcomes') return;
    this.captureBehindSince = message.captureBehindSince;
    for (const { id, outcome, cpuUs } of message.outcomes) {
      const head = this.sent[0];
      if (!head || head.id !== id) continue;
      this.sent.shift();
      this.spentMs += (cpuUs ?? 0) / 1000;
      // Evicts, closes and stats reach every child between lines' statements: not a line's cost.
      if ('db' in head.item.req) {
        this.statements++;
        this.hooks.ran?.(this, head.item.req, (cpuUs ?? 0) / 1000);
      }
      head.item.resolve(outcome);
    }
    if (this.sent.length) {
      this.headSince = Date.now();
      // The timer was armed for the statement before (a snapshot's or a restore's 30 minutes,
      // say): one sent behind it with a shorter limit would run unchecked until then (review R2).
      const due = this.headSince + this.deadlineMs(this.sent[0]!.item.req);
      if (!this.checking && (!this.timer || this.timerAt > due)) this.arm(due - this.headSince);
    } else {
      // Left armed, not holding the process up: clearing it and arming another for the next
      // statement cost two timer-list updates per call, on the call's path (issue 31). Firing
      // with nothing sent, it only goes.
      this.timer?.unref();
      this.idleSince = Date.now();
      child.channel?.unref();
      for (const resolve of this.whenIdle.splice(0)) resolve();
    }
    this.hooks.progress(this);
  }

  private deadlineMs(req: ExecRequest): number {
    return req.timeoutMs ?? this.opts.statementTimeoutMs;
  }

  /** After a kill or crash: the rest go back to the pool, and a stop() waiting for them goes on. */
  private handBack(items: Queued[]): void {
    for (const resolve of this.whenIdle.splice(0)) resolve();
    this.hooks.returned(this, items);
  }

  /** Arms the deadline's timer to fire in `ms`, replacing the one armed. */
  private arm(ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.onDeadline(), ms);
    this.timerAt = Date.now() + ms;
  }

  private onDeadline(read = false): void {
    this.timer = undefined;
    this.checking = false;
    const head = this.sent[0];
    const child = this.child;
    if (!head || !child) return;
    const ms = this.deadlineMs(head.item.req);
    const left = this.headSince + ms - Date.now();
    if (left > 0) {
      // The head changed since the timer was armed: wait out the current one's deadline.
      this.arm(left);
      return;
    }
    const marked = this.marks!.sort(this.sent);
    if (marked.running && marked.running !== head) {
      // The head finished, its answer held in the child behind the request running now (a big
      // answer is written out over several turns of the child's loop): that one's deadline counts.
      const rest = this.marks!.startedAt + this.deadlineMs(marked.running.item.req) - Date.now();
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
      setImmediate(() => this.onDeadline(true));
      return;
    }
    let { finished, running, unread } = this.marks!.sort(this.sent.splice(0));
    if (!running) {
      // Nothing marked running: the head answers for the deadline, as before marks existed.
      running = head;
      finished = finished.filter((s) => s !== head);
      unread = unread.filter((s) => s !== head);
    }
    const limit = this.deadlineMs(running.item.req);
    this.spentMs += limit;
    this.statements++;
    this.hooks.ran?.(this, running.item.req, limit);
    this.opts.logger?.warn(
      { ...about(running.item.req), child: this.index, childPid: child.pid, ms: limit, rerun: finished.length },
      'statement timed out; killing its executor child',
    );
    this.opts.metrics?.executorKills.inc({ reason: 'timeout' });
    this.replace(child, 'statement timeout');
    // A write may have committed at its very deadline, its answer not yet written.
    const lookup = answerAfterDeath(running.item, failure('STATEMENT_TIMEOUT', `its limit is ${limit} ms`), this.opts.logger, this.index);
    this.handBack([...lostAnswers(finished), ...(lookup ? [lookup] : []), ...unread.map((s) => s.item)]);
  }

  /**
   * The child is gone, and every mark it wrote is in its marks file: only the request it was
   * running answers for the death. Those it had
   * finished lost their answers with it and run again; those it never started run elsewhere.
   */
  private onDeath(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (child !== this.child) return;
    const { finished, running, unread } = this.marks!.sort(this.sent.splice(0));
    let lookup: Queued | undefined;
    if (running) {
      const ms = Date.now() - Math.max(this.headSince, this.marks!.startedAt);
      this.spentMs += ms;
      this.statements++;
      this.hooks.ran?.(this, running.item.req, ms);
      // It died on its own in the middle of a statement: memory is the usual cause. Answer
      // with a code that is not retried, so the same statement cannot crash the next child.
      this.opts.logger?.error(
        { ...about(running.item.req), child: this.index, childPid: child.pid, code, signal, rerun: finished.length },
        'executor child died during a statement',
      );
      const died = failure(
        'RESOURCE_LIMIT',
        `the statement stopped the database process (${signal ? `signal ${signal}` : `exit code ${code}`}); it used too much memory or resources`,
      );
      lookup = answerAfterDeath(running.item, died, this.opts.logger, this.index);
    } else
      this.opts.logger?.warn({ child: this.index, childPid: child.pid, code, signal, unread: unread.length, rerun: finished.length }, 'executor child exited');
    // (A child killed at its deadline was replaced first: its death returned above, counted as a timeout.)
    this.opts.metrics?.executorKills.inc({ reason: running ? 'resource' : 'exited' });
    // One that dies while idle, soon after it started, is not replaced in a loop.
    this.replace(child, 'it died', !running && Date.now() - this.spawnedAt < RESPAWN_BACKOFF_MS);
    this.handBack([...lostAnswers(finished), ...(lookup ? [lookup] : []), ...unread.map((s) => s.item)]);
  }

  /** Stops using `child` (killing it if it lives) and starts the next one, at once or after the backoff. */
  private replace(child: ChildProcess, why: string, backoff = false): void {
    if (this.child !== child) return;
    this.child = undefined;
    this.captureBehindSince = undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (this.stopping || this.state === 'stopped') {
      this.state = 'stopped';
      return;
    }
    this.state = 'down';
    this.replacedPid = child.pid;
    const spare = backoff ? undefined : this.hooks.spare();
    this.opts.logger?.info(
      { child: this.index, childPid: child.pid, why, by: spare ? 'the spare' : `a new child in ${backoff ? RESPAWN_BACKOFF_MS : 0} ms` },
      'replacing executor child',
    );
    // Adopted here, before the caller hands the waiting statements back to the pool: they find
    // this child ready.
    if (spare) this.adopt(spare, false);
    else this.respawnAfter(backoff ? RESPAWN_BACKOFF_MS : 0);
  }

  private respawnAfter(ms: number): void {
    clearTimeout(this.retry);
    this.retry = setTimeout(() => {
      if (this.state === 'down' && !this.stopping) void this.spawn().catch(() => undefined);
    }, ms);
    this.retry.unref();
  }

  private spawn(): Promise<void> {
    this.state = 'starting';
    const { dataDir, heapLimitMb, handleCacheSize, maxResultBytes, maxOffloadBytes, statementCacheBytes, history, child } = this.opts;
    const starting = startExecutorChild({ dataDir, heapLimitMb, handleCacheSize, maxResultBytes, maxOffloadBytes, statementCacheBytes, history }, child).then(
      (child) => this.adopt(child),
      (err: Error) => {
        this.lastError = err.message;
        this.startFailures++;
        this.opts.logger?.error({ child: this.index, err: err.message, failures: this.startFailures }, 'executor child failed to start');
        if (this.broken || this.stopping) for (const waiter of this.startWaiters.splice(0)) waiter.reject(err);
        if (!this.stopping) {
          this.state = 'down';
          this.respawnAfter(startBackoffMs(this.startFailures));
          this.hooks.progress(this);
        }
        throw err;
      },
    );
    this.starting = starting.catch(() => undefined);
    return starting;
  }

  /** Makes a ready child (with no listeners) this slot's own; `notify` tells the pool. */
  private adopt(child: ChildProcess, notify = true): void {
    if (this.stopping) {
      this.state = 'stopped';
      void endExecutorChild(child);
      for (const waiter of this.startWaiters.splice(0)) waiter.resolve();
      return;
    }
    this.child = child;
    this.childId = ++serial;
    this.state = 'ready';
    this.lastError = '';
    this.startFailures = 0;
    for (const waiter of this.startWaiters.splice(0)) waiter.resolve();
    this.spawnedAt = this.idleSince = Date.now();
    this.recent.clear();
    this.marks = new StatementMarks(child);
    child.on('message', (message: ChildMessage) => this.onOutcomes(child, message));
    // Channel errors; the worker must never crash on them, and an exit follows.
    child.on('error', (err) => this.opts.logger?.warn({ child: this.index, childPid: child.pid, err: err.message }, 'executor child error'));
    // 'close', not 'exit': it comes after the channel's last message, so an answer written just
    // before the child died is read first (and its request is not run again).
    child.on('close', (code, signal) => this.onDeath(child, code, signal));
    if (this.replacedPid !== undefined) this.opts.metrics?.executorRestarts.inc();
    if (this.replacedPid !== undefined)
      this.opts.logger?.info({ child: this.index, childPid: child.pid, replacedPid: this.replacedPid }, 'executor child respawned');
    this.replacedPid = undefined;
    if (notify) this.hooks.progress(this);
  }
}
