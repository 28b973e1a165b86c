import type { ChildProcess } from 'node:child_process';
import type { ErrorCode } from '../errors.ts';
import type { ChildMessage, ChildOptions, ChildRequest, ExecOutcome, ExecRequest } from './executor-protocol.ts';
import { forkExecutorChild } from './executor-spawn.ts';

/** The subset of a pino logger the executor uses. */
export interface ExecutorLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Options of an {@link Executor}; the worker passes them from its Config. */
export interface ExecutorOptions {
  /** DATA_DIR: the child opens nothing outside it. */
  dataDir: string;
  /** A statement running longer is killed with its child: STATEMENT_TIMEOUT. */
  statementTimeoutMs: number;
  /** Memory SQLite may use in the child, in MiB (see `dataLimitKiB`). */
  heapLimitMb: number;
  /** Open SQLite handles the child keeps. */
  handleCacheSize: number;
  /** Query results are cut to this much JSON. */
  maxResultBytes: number;
  /** Estimated bytes the child's cached statements may take; the child's default when absent. */
  statementCacheBytes?: number;
  logger?: ExecutorLogger;
}

interface Pending {
  req: ExecRequest;
  resolve: (outcome: ExecOutcome) => void;
}

/** A request written to a child, awaiting its outcome. */
interface Sent {
  id: number;
  pending: Pending;
}

/** Requests written to the child ahead of their turn; bounds what one kill sends back to the queue. */
const MAX_PIPELINE = 64;

const failure = (code: ErrorCode, detail: string): ExecOutcome => ({ ok: false, error: { code, detail } });

/**
 * Runs SQLite for one worker process in a child process it can kill.
 *
 * better-sqlite3 is synchronous and has no interrupt: a statement that runs for a minute would
 * block the worker's event loop, lose its BullMQ locks and get its jobs run twice. So every
 * statement runs in a child. Requests are pipelined to it (a round trip per statement would cap
 * a worker at a few thousand calls a second), but the child runs them strictly in order, so the
 * deadline is per statement all the same: the head of the line started when the one before it
 * answered. Past `statementTimeoutMs` the child is SIGKILLed, the head answers
 * STATEMENT_TIMEOUT and the requests behind it — which never started — go to a fresh child;
 * WAL makes the kill safe for every database. A child that dies on its own (out of memory)
 * answers RESOURCE_LIMIT for the statement it was running, which is not retried into another
 * crash. The worker never dies with it.
 */
export class Executor {
  private child?: ChildProcess;
  private ready = false;
  private starting?: Promise<void>;
  private readonly queue: Pending[] = [];
  /** Written to the current child, in the order it runs them. */
  private sent: Sent[] = [];
  /** When the head of `sent` started running. */
  private headSince = 0;
  private timer?: NodeJS.Timeout;
  private nextId = 1;
  private stopped = false;

  constructor(private readonly opts: ExecutorOptions) {
    // These end up in a shell command line and a setTimeout; config validated them, this keeps
    // any other caller honest.
    for (const key of ['statementTimeoutMs', 'heapLimitMb', 'handleCacheSize', 'maxResultBytes'] as const) {
      if (!Number.isSafeInteger(opts[key]) || opts[key] < 1) throw new RangeError(`${key} must be a positive integer, got ${opts[key]}`);
    }
  }

  /**
   * Starts the child and resolves once it listens.
   * @throws Error when the child cannot start (it exits before it is ready).
   */
  async start(): Promise<void> {
    this.stopped = false;
    await this.ensureChild();
  }

  /** The current child's pid, if one runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /**
   * Runs one request. Resolves with an outcome for every agent error, timeout and child crash;
   * never rejects.
   */
  run(req: ExecRequest): Promise<ExecOutcome> {
    if (this.stopped) return Promise.resolve(failure('UNAVAILABLE', 'the executor is stopped'));
    return new Promise((resolve) => {
      this.queue.push({ req, resolve });
      if (this.queue.length > 1) return;
      // An idle child gets the request at once: deferring it would let the worker's other
      // pending work (BullMQ's next fetch, a socket write of ~40 µs) go first, on every call.
      // While the child is busy, requests arriving in the same tick travel in one message.
      if (this.sent.length === 0) this.pump();
      else queueMicrotask(() => this.pump());
    });
  }

  /**
   * Lets the requests already sent finish, answers queued ones UNAVAILABLE, and ends the child
   * (it closes its handles, checkpointing each WAL, when its channel closes).
   */
  async stop(): Promise<void> {
    // Requests accepted in this tick have not been written yet: they count as sent.
    this.pump();
    this.stopped = true;
    for (const pending of this.queue.splice(0)) pending.resolve(failure('UNAVAILABLE', 'the executor stopped'));
    if (this.sent.length) await new Promise<void>((resolve) => this.whenIdle.push(resolve));
    await this.starting?.catch(() => undefined);
    const child = this.child;
    this.child = undefined;
    this.ready = false;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      // Held while we wait, or a process whose last work is this stop() would exit under us.
      child.ref();
      child.once('exit', () => resolve());
      const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
      kill.unref();
      child.once('exit', () => clearTimeout(kill));
      if (child.connected) child.disconnect();
      else child.kill('SIGKILL');
    });
  }

  private readonly whenIdle: (() => void)[] = [];

  private pump(): void {
    if (this.queue.length === 0 || this.sent.length >= MAX_PIPELINE) return;
    const child = this.child;
    if (!child || !this.ready) {
      void this.ensureChild().catch(() => undefined);
      return;
    }
    const batch = this.queue.splice(0, MAX_PIPELINE - this.sent.length).map((pending) => ({ id: this.nextId++, pending }));
    if (this.sent.length === 0) this.startHead();
    this.sent.push(...batch);
    child.channel?.ref();
    const message: ChildRequest[] = batch.map(({ id, pending }) => ({ id, req: pending.req }));
    child.send(message, (err) => {
      if (!err || this.child !== child) return;
      // The channel broke: the child is useless. What it did not answer goes to the next one
      // (a write that did run is replayed from its recorded call id, not run twice).
      this.discard(child, 'could not send to the child');
      this.requeue(this.sent.splice(0));
      this.settle();
    });
  }

  /** The head of the line starts now: arm its deadline. */
  private startHead(): void {
    this.headSince = Date.now();
    if (!this.timer) this.timer = setTimeout(() => this.onDeadline(), this.opts.statementTimeoutMs);
  }

  private requeue(sent: Sent[]): void {
    this.queue.unshift(...sent.map((s) => s.pending));
  }

  private onOutcomes(child: ChildProcess, message: ChildMessage): void {
    if (message.type !== 'outcomes' || child !== this.child) return;
    for (const { id, outcome } of message.outcomes) {
      const head = this.sent[0];
      if (!head || head.id !== id) continue;
      this.sent.shift();
      head.pending.resolve(outcome);
    }
    if (this.sent.length) this.headSince = Date.now();
    else {
      clearTimeout(this.timer);
      this.timer = undefined;
      child.channel?.unref();
    }
    this.settle();
  }

  private onDeadline(): void {
    this.timer = undefined;
    const head = this.sent[0];
    const child = this.child;
    if (!head || !child) return;
    const left = this.headSince + this.opts.statementTimeoutMs - Date.now();
    if (left > 0) {
      // The head changed since the timer was armed: wait out the current one's deadline.
      this.timer = setTimeout(() => this.onDeadline(), left);
      return;
    }
    this.sent.shift();
    this.opts.logger?.warn({ op: head.pending.req.op, pid: child.pid, ms: this.opts.statementTimeoutMs }, 'statement timed out; killing the executor child');
    this.discard(child, 'statement timeout');
    this.requeue(this.sent.splice(0));
    head.pending.resolve(failure('STATEMENT_TIMEOUT', `the statement ran longer than ${this.opts.statementTimeoutMs} ms and was stopped`));
    // Start the next child now, so the call after a timeout does not wait for it.
    void this.ensureChild().catch(() => undefined);
    this.settle();
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (child !== this.child) return this.settle();
    this.child = undefined;
    this.ready = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    const [head, ...behind] = this.sent.splice(0);
    this.requeue(behind);
    if (head) {
      // It died on its own in the middle of a statement: memory is the usual cause. Answer
      // with a code that is not retried, so the same statement cannot crash the next child.
      this.opts.logger?.error({ op: head.pending.req.op, pid: child.pid, code, signal }, 'executor child died during a statement');
      head.pending.resolve(
        failure('RESOURCE_LIMIT', `the statement stopped the database process (${signal ? `signal ${signal}` : `exit code ${code}`}); it used too much memory or resources`),
      );
      // After a crash mid-statement, restart at once; a child that died while idle is
      // restarted by the next request instead, so one that cannot live cannot spin.
      if (!this.stopped) void this.ensureChild().catch(() => undefined);
    } else this.opts.logger?.warn({ pid: child.pid, code, signal }, 'executor child exited');
    this.settle();
  }

  /** After a request ended: wake `stop()`, or go on with the queue (`pump` starts a child). */
  private settle(): void {
    if (this.stopped) {
      if (this.sent.length === 0) for (const resolve of this.whenIdle.splice(0)) resolve();
      return;
    }
    this.pump();
  }

  /** Stops using `child` at once and kills it; the next request gets a fresh one. */
  private discard(child: ChildProcess, why: string): void {
    if (this.child === child) {
      this.child = undefined;
      this.ready = false;
    }
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    this.opts.logger?.info({ pid: child.pid, why }, 'executor child discarded');
  }

  private ensureChild(): Promise<void> {
    if (this.child) return this.starting ?? Promise.resolve();
    this.starting = this.spawnChild().then(
      () => {
        this.starting = undefined;
        this.pump();
      },
      (err: Error) => {
        this.starting = undefined;
        this.opts.logger?.error({ err: err.message }, 'executor child failed to start');
        // Do not loop on a child that cannot start; answer what waits, try again on the next run.
        for (const pending of this.queue.splice(0)) pending.resolve(failure('INTERNAL', `the database process could not start: ${err.message}`));
        throw err;
      },
    );
    return this.starting;
  }

  private spawnChild(): Promise<void> {
    const childOpts: ChildOptions = {
      dataDir: this.opts.dataDir,
      heapLimitMb: this.opts.heapLimitMb,
      handleCacheSize: this.opts.handleCacheSize,
      maxResultBytes: this.opts.maxResultBytes,
      statementCacheBytes: this.opts.statementCacheBytes,
    };
    const child = forkExecutorChild(childOpts);
    this.child = child;
    this.ready = false;
    // The child must not keep the worker alive on its own; a request in flight refs the channel.
    child.unref();
    return new Promise((resolve, reject) => {
      let settled = false;
      child.on('message', (message: ChildMessage) => {
        if (message.type === 'ready') {
          settled = true;
          child.channel?.unref();
          if (this.child === child) this.ready = true;
          resolve();
        } else this.onOutcomes(child, message);
      });
      child.on('error', (err) => {
        // Spawn failures and channel errors; the worker must never crash on them.
        this.opts.logger?.warn({ pid: child.pid, err: err.message }, 'executor child error');
        if (!settled) {
          settled = true;
          if (this.child === child) this.child = undefined;
          reject(err);
        }
      });
      child.on('exit', (code, signal) => {
        if (!settled) {
          settled = true;
          if (this.child === child) this.child = undefined;
          reject(new Error(`the child exited before it was ready (${signal ? `signal ${signal}` : `exit code ${code}`})`));
          return;
        }
        this.onExit(child, code, signal);
      });
    });
  }
}
