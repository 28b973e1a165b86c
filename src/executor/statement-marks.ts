import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';

/**
 * The child's fd of its marks file: the fifth of its stdio, after stdin, stdout, stderr and the
 * IPC channel (see `forkExecutorChild`).
 */
export const MARKS_FD = 4;

/** Three float64s: the request started last, when (epoch ms), and the last one finished. */
const MARK_BYTES = 24;

// Child side: its marks, as written in place at offset 0 of the file.
const mark = new Float64Array(3);
const markBytes = new Uint8Array(mark.buffer);

/**
 * Child side: says that request `id` starts now. A write(2) into the file before the statement
 * runs: the page cache holds it however the child dies the next instant, and the worker reads
 * it only then (nothing to wake it meanwhile). Not on the IPC channel: there it would queue
 * behind an answer still being written (a 900 KB read's takes several turns of the child's
 * loop), which a statement that kills the child never lets go out — and the worker blamed the
 * read (review 16b). Nor on a pipe: the worker's reads of one mark per statement doubled its
 * CPU per pipelined statement.
 */
export function markStarted(id: number): void {
  mark[0] = id;
  mark[1] = Date.now();
  fs.writeSync(MARKS_FD, markBytes, 0, MARK_BYTES, 0);
}

/** Child side: every request up to `id` has finished; the child is idle (its answers may still be on their way). */
export function markFinished(id: number): void {
  mark[2] = id;
  fs.writeSync(MARKS_FD, markBytes, 0, MARK_BYTES, 0);
}

/** @throws Error when the child was started without its marks file: it cannot serve a pool then. */
export function checkMarksFile(): void {
  fs.fstatSync(MARKS_FD);
}

const files = new WeakMap<ChildProcess, number>();

/**
 * Where marks files go: shared memory (tmpfs) where the system has it, else the temporary folder.
 * The child writes its file before every statement, and a write into a file of a journaling file
 * system (the temporary folder on ext4) updates the file's times through the journal: 24 bytes
 * written 1 ms apart cost ~2 µs more there than on tmpfs (6 of 6 rounds, load 5-10; issue 31).
 */
const marksDirs = (): string[] => ['/dev/shm', os.tmpdir()];

/**
 * Parent side: a marks file for a child about to be forked, as an open fd (passed as its stdio
 * `MARKS_FD`). Unlinked at once: nothing is left behind, whoever dies.
 * @throws Error when no folder of {@link marksDirs} takes the file.
 */
export function openMarksFile(): number {
  let failed: unknown;
  for (const dir of marksDirs()) {
    let fd: number | undefined;
    try {
      const file = path.join(dir, `agentdb-marks-${process.pid}-${randomUUID()}`);
      fd = fs.openSync(file, 'w+', 0o600);
      fs.unlinkSync(file);
      fs.writeSync(fd, new Uint8Array(MARK_BYTES), 0, MARK_BYTES, 0);
      return fd;
    } catch (err) {
      // No such folder, not writable, or full: the next one.
      if (fd !== undefined) fs.closeSync(fd);
      failed = err;
    }
  }
  throw failed;
}

/** Parent side: ties `fd` to the forked `child`, and closes it once the child is gone and read. */
export function keepMarksFile(child: ChildProcess, fd: number): void {
  files.set(child, fd);
  // After every 'close' listener (the pool reads the marks in its own), on the next turn.
  child.once('close', () => setImmediate(() => fs.closeSync(fd)));
}

/**
 * The requests a dead (or killed) child was sent and never answered, by what became of them:
 * `finished` ran to the end and lost their answers with the child, `running` is the one it was
 * running when it died (at most one: a child runs its requests one at a time, in order), and
 * `unread` it never started.
 */
export interface Unanswered<T> {
  finished: T[];
  running?: T;
  unread: T[];
}

/**
 * Parent side: what one child has started and finished, read from its marks file when asked.
 * At a death these are the child's last word: the last request it started is the one that was
 * running, unless it said it finished.
 */
export class StatementMarks {
  /** The last request the child started (0: none), as of the last `sort`. */
  started = 0;
  /** When it started it (epoch ms). */
  startedAt = 0;
  /** Every request up to this one had finished when the child last went idle. */
  finished = 0;
  private readonly fd?: number;

  constructor(child: ChildProcess) {
    this.fd = files.get(child);
  }

  /** Sorts `sent` (ids ascending) by the child's marks now. */
  sort<T extends { id: number }>(sent: readonly T[]): Unanswered<T> {
    this.read();
    const out: Unanswered<T> = { finished: [], unread: [] };
    for (const s of sent) {
      if (s.id > this.started) out.unread.push(s);
      else if (s.id < this.started || s.id <= this.finished) out.finished.push(s);
      else out.running = s;
    }
    return out;
  }

  private read(): void {
    if (this.fd === undefined) return;
    const marks = new Float64Array(3);
    try {
      fs.readSync(this.fd, new Uint8Array(marks.buffer), 0, MARK_BYTES, 0);
    } catch {
      return; // closed: the child is long gone, and what was read last stands
    }
    [this.started, this.startedAt, this.finished] = [marks[0]!, marks[1]!, marks[2]!];
  }
}
