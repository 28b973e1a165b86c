import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import nodeModule from 'node:module';
import { childModule, type ChildModule } from './child-module.ts';
import type { ChildMessage, ChildOptions } from './executor-protocol.ts';
import { keepMarksFile, openMarksFile } from './statement-marks.ts';

/**
 * Room for Node itself (V8 heap, code, better-sqlite3, tsx) on top of SQLite's allowance in the
 * child's data-segment limit. An idle child uses well under 100 MiB of it.
 */
export const NODE_ALLOWANCE_MB = 512;

/**
 * The data-segment limit (RLIMIT_DATA, which on Linux also counts private anonymous mappings,
 * i.e. every malloc) the child is started under, in KiB. This is what actually stops a
 * statement from eating the host: better-sqlite3 is built with SQLITE_DEFAULT_MEMSTATUS=0, and
 * without memory statistics SQLite does not enforce `PRAGMA hard_heap_limit`. Past the limit
 * SQLite's malloc fails (SQLITE_NOMEM → RESOURCE_LIMIT) or V8 aborts the child (→ RESOURCE_LIMIT).
 */
export function dataLimitKiB(heapLimitMb: number): number {
  return (heapLimitMb + NODE_ALLOWANCE_MB + codeRangeMb()) * 1024;
}

let codeRange: number | undefined;

/**
 * The code range this Node reserves for an isolate, in MiB, as this very process holds it: the
 * child runs the same binary. Node 24 maps it readable, writable and executable up front (512 MiB,
 * protected by memory keys rather than by mapping it late), so RLIMIT_DATA counts it although none
 * of it is memory in use; Node 20 and 22 (22.23 measured: 0.2 MiB) map it as code is made. Read,
 * not assumed by version, since it is a build's choice.
 */
export function codeRangeMb(): number {
  if (codeRange !== undefined) return codeRange;
  let largest = 0;
  try {
    for (const line of fs.readFileSync('/proc/self/maps', 'utf8').split('\n')) {
      // `start-end perms offset dev inode [path]`: an anonymous private rwx mapping has inode 0 and no path.
      const [range, perms, , , inode, file] = line.split(/\s+/);
      if (perms !== 'rwxp' || inode !== '0' || file) continue;
      const [start, end] = range!.split('-').map((h) => Number.parseInt(h, 16));
      largest = Math.max(largest, (end! - start!) / (1024 * 1024));
    }
  } catch {
    // No /proc (not Linux): no data-segment limit is set there either (see limitShell below).
  }
  codeRange = Math.ceil(largest);
  return codeRange;
}

// Both looked up on the first fork, not on import (nothing runs on import: test/unit/import-effects.test.ts).
let childFound: ChildModule | undefined;
let shellFound: { path?: string } | undefined;
/** executor-child.js beside a build, executor-child.ts under tsx beside the sources. */
const executorChild = (): ChildModule => (childFound ??= childModule('executor-child', import.meta.url));
/**
 * The shell that sets the limit and then execs node in its place (same pid, same IPC channel):
 * Node has no setrlimit of its own. Linux only: elsewhere RLIMIT_DATA does not cover mmap.
 */
const limitShell = (): string | undefined => (shellFound ??= process.platform === 'linux' && fs.existsSync('/bin/sh') ? { path: '/bin/sh' } : {}).path;

/**
 * Forks the executor child: `node executor-child.js '<options>'` (from the sources:
 * `node --import tsx executor-child.ts`) with an IPC
 * channel and a marks file, under the data-segment limit where the platform has one. The
 * child's stdout and stderr are the worker's.
 */
export function forkExecutorChild(opts: ChildOptions, child: ChildModule = executorChild()): ChildProcess {
  const nodeArgs = child.execArgv;
  const shell = limitShell();
  const marks = openMarksFile();
  let forked: ChildProcess;
  try {
    forked = fork(child.file, [JSON.stringify(opts)], {
      // fork() runs `execPath ...execArgv CHILD_FILE args`; with the shell in front that is
      // `sh -c 'ulimit -d N && exec "$0" "$@"' node [--import tsx] CHILD_FILE args`.
      ...(shell
        ? { execPath: shell, execArgv: ['-c', `ulimit -d ${dataLimitKiB(opts.heapLimitMb)} && exec "$0" "$@"`, process.execPath, ...nodeArgs] }
        : { execArgv: nodeArgs }),
      serialization: 'json',
      ...childEnv(),
      // fd 4: the marks file, where the child says which request it runs (`statement-marks.ts`).
      stdio: ['ignore', 'inherit', 'inherit', 'ipc', marks],
    });
  } catch (err) {
    fs.closeSync(marks);
    throw err;
  }
  keepMarksFile(forked, marks);
  return forked;
}

/**
 * The child's environment: the worker's, with the worker's compile cache named when the worker
 * turned one on (`bin/agentdb` does, by `module.enableCompileCache`, which children do not
 * inherit): each child compiles the same ~100 modules at its start, ~12 % of its CPU to ready
 * (3 × 6 starts alternating, 8.5 → 7.5 ticks of 10 ms; session 29).
 */
function childEnv(): { env?: NodeJS.ProcessEnv } {
  if (process.env.NODE_COMPILE_CACHE !== undefined) return {};
  const dir = (nodeModule as { getCompileCacheDir?: () => string | undefined }).getCompileCacheDir?.();
  return dir ? { env: { ...process.env, NODE_COMPILE_CACHE: dir } } : {};
}

/**
 * Ends a child the gentle way: it closes its handles (checkpointing each WAL) when its channel
 * closes. SIGKILL after 5 s, or at once when the channel is gone. Resolves once it has exited.
 */
export function endExecutorChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    // Held while we wait, or a process whose last work is this stop() would exit under us.
    child.ref();
    const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
    kill.unref();
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    if (child.connected) child.disconnect();
    else child.kill('SIGKILL');
  });
}

/**
 * Forks a child and resolves with it once it listens (its `ready`), with none of this
 * function's listeners left on it: whoever takes it attaches its own. The child and its channel
 * are unref'd, so an idle child never keeps the worker alive.
 * @throws Error when it cannot be spawned or exits before it is ready.
 */
export function startExecutorChild(opts: ChildOptions, module?: ChildModule): Promise<ChildProcess> {
  const child = forkExecutorChild(opts, module);
  child.unref();
  return new Promise((resolve, reject) => {
    const onMessage = (message: ChildMessage) => {
      if (message.type !== 'ready') return;
      done();
      child.channel?.unref();
      resolve(child);
    };
    const onError = (err: Error) => {
      done();
      child.kill('SIGKILL');
      reject(err);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      done();
      reject(new Error(`the child exited before it was ready (${signal ? `signal ${signal}` : `exit code ${code}`})`));
    };
    const done = () => {
      child.off('message', onMessage);
      child.off('error', onError);
      child.off('exit', onExit);
    };
    child.on('message', onMessage);
    child.on('error', onError);
    child.on('exit', onExit);
  });
}
