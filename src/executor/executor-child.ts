/**
 * An executor child's entry point: one of a worker's pool of children; it keeps its own SQLite
 * handles and runs one request at a time, so the worker can SIGKILL it when a statement passes its deadline
 * (better-sqlite3 has no interrupt) without losing anything but that statement.
 *
 * Started by `ExecutorProcess` with `node --import tsx executor-child.ts '<ChildOptions JSON>'`.
 */
import Database from 'better-sqlite3';
import { dispatch } from './executor-dispatch.ts';
import type { ChildMessage, ChildOptions, ChildRequest, ExecOutcome } from './executor-protocol.ts';
import { HandleCache } from '../sqlite/handle-cache.ts';
import { HistoryCapture } from '../history/handle-capture.ts';
import { dieWithParent } from './parent-watch.ts';
import { checkMarksFile, markFinished, markStarted } from './statement-marks.ts';
import { statementCache } from '../sqlite/statement-cache.ts';
import { KeptTargets } from './target-refs.ts';

const FLUSH_AFTER_MS = 5;
/** How a send fails once the worker's end of the channel is closed. */
const CHANNEL_GONE = new Set(['EPIPE', 'ECONNRESET', 'ERR_IPC_CHANNEL_CLOSED']);

type Outcome = { id: number; outcome: ExecOutcome; cpuUs: number };

/**
 * The CPU a statement takes, read before and after it: the main thread's own (RUSAGE_THREAD),
 * where better-sqlite3 runs it whole (SQLite's sorter threads are off: DEFAULT_WORKER_THREADS=0,
 * and an agent may not run `PRAGMA threads`). The process's (RUSAGE_SELF) sums every thread of the child
 * in the kernel, ~2.5 µs a read against ~1 (both taken twice a statement, issue 31), and counted
 * V8's helper threads' collection and compiling into the statement that happened to run beside
 * them. A Node without `threadCpuUsage` (added in 23.9, in 22.23 too) reads the process's.
 */
const cpuUsage: (previous?: NodeJS.CpuUsage) => NodeJS.CpuUsage =
  (process as { threadCpuUsage?: typeof process.cpuUsage }).threadCpuUsage?.bind(process) ?? process.cpuUsage.bind(process);

function main(): void {
  const send = process.send?.bind(process);
  if (!send) {
    process.stderr.write('executor-child: must be started by the worker with an IPC channel\n');
    process.exit(2);
  }
  try {
    checkMarksFile();
  } catch {
    process.stderr.write('executor-child: must be started by the worker with a marks file (fd 4)\n');
    process.exit(2);
  }
  const opts = JSON.parse(process.argv[2] ?? '') as ChildOptions;
  const parent = process.ppid;

  // SQLite's heap limit is process-wide; any connection may set it. It bounds SQLite's own
  // allocations where the build counts them (this better-sqlite3 build does not: it has
  // SQLITE_DEFAULT_MEMSTATUS=0, so the worker also caps the child's data segment).
  const probe = new Database(':memory:');
  probe.pragma(`hard_heap_limit = ${opts.heapLimitMb * 1024 * 1024}`);
  probe.close();

  const history = opts.history ? new HistoryCapture(opts.dataDir, opts.history) : undefined;
  // A miss's close of the least recently used handle waits until the answer is sent (`settle`
  // below): the worker has the answer meanwhile.
  const handles = new HandleCache({ size: opts.handleCacheSize, settleLater: true, ...history?.hooks() });
  if (opts.statementCacheBytes !== undefined) statementCache.setBudget(opts.statementCacheBytes);
  // The databases' targets the worker sent whole, which its later requests name by number.
  const targets = new KeptTargets();

  // Requests come pipelined, several to a message. Outcomes go back together too, except that
  // whatever is done is sent before a request starts once FLUSH_AFTER_MS have passed: the
  // worker times each statement from the answer before it, so its deadlines stay accurate to
  // a few milliseconds while a busy child answers in few messages.
  // Each request is marked started in the marks file before it runs, and the batch finished
  // once its answers are handed to the channel: when a statement kills the child, the worker
  // holds exactly that one to account (see `StatementMarks`).
  // The watch on the parent starts with the first request: a thread costs a third of the child's
  // start (~0.045 s of CPU), and a child that has run nothing (the spare, an idle overflow lane)
  // hears its parent go when the channel closes, as every idle child does.
  let watching = false;
  process.on('message', (message: ChildRequest[]) => {
    if (!watching) {
      dieWithParent(parent);
      watching = true;
    }
    let done: Outcome[] = [];
    let since = performance.now();
    for (const sent of message) {
      const { id, reopen } = sent;
      if (done.length && performance.now() - since > FLUSH_AFTER_MS) {
        reply(send, done, history?.oldestBehind());
        done = [];
        since = performance.now();
      }
      // A write's commit is copied into history once its answer is sent, when that is now (see
      // `afterCommit`), and at the latest before the next request runs.
      history?.finishCommitted();
      handles.settle();
      markStarted(id);
      const req = targets.resolve(sent);
      if (!req) {
        done.push({ id, outcome: { ok: false, error: { code: 'INTERNAL', detail: 'the request names a database this child was never sent' } }, cpuUs: 0 });
        continue;
      }
      if (reopen && req.op !== 'evict' && req.op !== 'stats' && req.op !== 'close') {
        try {
          handles.evict(req.db.path);
        } catch {
          // History could not copy the WAL first (a full disk): closing would lose those frames
          // from it, so the handle goes on being used (see `HandleCache`).
        }
      }
      const cpu = cpuUsage();
      const started = performance.now();
      const outcome = dispatch(handles, opts, req, history);
      // A write that took long may have made a big commit, and copying it is that write's time,
      // not the next request's (the worker times each request from the answer before it).
      if (performance.now() - started > FLUSH_AFTER_MS) history?.finishCommitted();
      const used = cpuUsage(cpu);
      done.push({ id, outcome, cpuUs: used.user + used.system });
    }
    // The commit's copy into history and a miss's close, once the answer is sent and any end mark
    // written: a child that dies in them has marked what it finished, as before the mark waited.
    const settle = () => {
      history?.finishCommitted();
      handles.settle();
    };
    if (message.length) finishedOnceSent(send, done, history?.oldestBehind(), message[message.length - 1]!.id, settle);
    else {
      reply(send, done, history?.oldestBehind());
      settle();
    }
  });
  // Ctrl-C and `kill -TERM` reach the whole process group, this child included; its life
  // belongs to the worker, which finishes the statement in hand and then disconnects. Dying
  // here first would fail that statement as a crash.
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => undefined);
  // The worker went away (it exited or crashed): close cleanly, checkpointing each WAL. A handle
  // whose WAL history could not copy stays open (`HandleCache`), and `process.exit` leaves it so:
  // SQLite's close would checkpoint those frames away from history for good. Only an exit that
  // tears Node's environment down (the event loop running dry) has better-sqlite3 close every
  // handle still open, checkpointing as the last connection: this child never ends that way.
  const parentGone = () => {
    history?.finishCommitted();
    handles.closeAll();
    process.exit(0);
  };
  process.on('disconnect', parentGone);
  // An answer sent without a callback (a flush before the message's next request) into a channel
  // whose worker was SIGKILLed while this child ran a statement fails with EPIPE, which Node
  // emits on process: unheard, the child died of it with a stack trace in the worker's log
  // (session 30, F6's ledger), before 'disconnect' could say the same. The parent is gone either way.
  process.on('error', (err: NodeJS.ErrnoException) => {
    if (!CHANNEL_GONE.has(err.code ?? '')) process.stderr.write(`executor-child: the channel to the worker failed: ${String(err)}\n`);
    parentGone();
  });
  send({ type: 'ready' } satisfies ChildMessage);
}

/**
 * Sends a message's last outcomes, then marks every request up to `last` finished unless the
 * answer reached the channel's socket whole at once: a worker then reads it before it hears of
 * any death of this child (its 'close'), so the mark would say nothing it does not learn anyway
 * (test/integration/child-end-mark.test.ts holds both cases). Node calls a send's callback once
 * its write is done: on the next tick for one done at once, before the look queued after it, and
 * only later for one still being written (a large answer; a worker slow to read), which the look
 * then marks, ahead of the history copy that follows as before. One system call fewer per message
 * for nearly every answer (issue 31: the end mark was a third of a PK read's writes in the child).
 */
function finishedOnceSent(
  send: NonNullable<typeof process.send>,
  outcomes: Outcome[],
  captureBehindSince: number | undefined,
  last: number,
  /** What follows the answer, run after the mark (or its absence) is settled. */
  then: () => void,
): void {
  let written = false;
  reply(send, outcomes, captureBehindSince, (err) => {
    // An error: the channel closed (the worker is gone, and 'disconnect' ends this child).
    written = !err;
  });
  process.nextTick(() => {
    if (!written) markFinished(last);
    then();
  });
}

function reply(
  send: NonNullable<typeof process.send>,
  outcomes: Outcome[],
  captureBehindSince: number | undefined,
  /** Called once the message is written whole, or could not be (not for the one-by-one sends below). */
  written?: (err: Error | null) => void,
): void {
  try {
    send(
      { type: 'outcomes', outcomes, ...(captureBehindSince === undefined ? {} : { captureBehindSince }) } satisfies ChildMessage,
      undefined,
      undefined,
      written,
    );
  } catch {
    // A result that cannot be serialised must still answer, or the worker waits for its deadline.
    for (const { id, outcome, cpuUs } of outcomes) {
      try {
        send({
          type: 'outcomes',
          outcomes: [{ id, outcome, cpuUs }],
          ...(captureBehindSince === undefined ? {} : { captureBehindSince }),
        } satisfies ChildMessage);
      } catch (err) {
        const failed: ExecOutcome = { ok: false, error: { code: 'INTERNAL', detail: `result could not be sent: ${String(err)}` } };
        send({ type: 'outcomes', outcomes: [{ id, outcome: failed, cpuUs }] } satisfies ChildMessage);
      }
    }
  }
}

main();
