import fs from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';

/**
 * The child's end of its marks pipe: the fifth of its stdio, after stdin, stdout, stderr and
 * the IPC channel (see `forkExecutorChild`).
 */
export const MARKS_FD = 4;

/**
 * Child side: says on the marks pipe that request `id` starts now. Written with a blocking
 * write(2) before the statement runs, so it is in the kernel, and reaches the worker, even if
 * the statement kills the child the next instant. Not on the IPC channel: there it would queue
 * behind an answer still being written (a 900 KB read's takes a few event-loop turns), which a
 * statement that kills the child never lets go out — and the worker blamed that read.
 */
export function markStarted(id: number): void {
  writeMark(`s${id}\n`);
}

/** Child side: every request up to `id` has finished; the child is idle (its answers may still be on their way). */
export function markFinished(id: number): void {
  writeMark(`f${id}\n`);
}

/** @throws Error when the child was started without the pipe: it cannot serve a pool then. */
export function checkMarksPipe(): void {
  fs.fstatSync(MARKS_FD);
}

function writeMark(text: string): void {
  const bytes = Buffer.from(text, 'latin1');
  for (let off = 0; off < bytes.length; ) {
    try {
      off += fs.writeSync(MARKS_FD, bytes, off);
    } catch (err) {
      // The pipe is blocking (libuv leaves the child's end so); EAGAIN only if someone made it not.
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
    }
  }
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
 * Parent side: what one child has started and finished, read from its marks pipe. The pipe is
 * read to its end before the child's 'close' event, so at a death these are the child's last
 * word: the last request it started is the one that was running, unless it said it finished.
 */
export class StatementMarks {
  /** The last request the child started (0: none). */
  started = 0;
  /** When its mark came. */
  startedAt = 0;
  /** Every request up to this one had finished when the child last went idle. */
  finished = 0;
  private partial = '';

  constructor(child: ChildProcess) {
    const pipe = child.stdio[MARKS_FD] as Socket | null | undefined;
    if (!pipe) return;
    pipe.setEncoding('latin1');
    pipe.on('data', (chunk: string) => this.read(chunk));
    // Channel errors come with the child's death, which says what matters.
    pipe.on('error', () => undefined);
    // An idle child must not keep the worker alive (its IPC channel is ref'd while it works).
    pipe.unref();
  }

  /** Sorts `sent` (ids ascending) by the marks read so far. */
  sort<T extends { id: number }>(sent: readonly T[]): Unanswered<T> {
    const out: Unanswered<T> = { finished: [], unread: [] };
    for (const s of sent) {
      if (s.id > this.started) out.unread.push(s);
      else if (s.id < this.started || s.id <= this.finished) out.finished.push(s);
      else out.running = s;
    }
    return out;
  }

  private read(chunk: string): void {
    const text = this.partial + chunk;
    const end = text.lastIndexOf('\n');
    this.partial = text.slice(end + 1);
    if (end < 0) return;
    for (const line of text.slice(0, end).split('\n')) {
      const id = Number(line.slice(1));
      if (line[0] === 's' && id > this.started) {
        this.started = id;
        this.startedAt = Date.now();
      } else if (line[0] === 'f' && id > this.finished) this.finished = id;
    }
  }
}
