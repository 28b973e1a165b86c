import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { fileURLToPath } from 'node:url';

/**
 * `agentdb` as users run it: the built binary, which forks its workers' executor children from
 * the build too. test/global-setup.ts builds dist/ afresh before the suite whenever a source is
 * newer, so no test runs a stale build; under tsx each of these starts cost about five times the
 * CPU. Installed from a packed tarball it is tested in test/e2e/package.test.ts.
 */
export const CLI = [fileURLToPath(new URL('../../dist/bin/agentdb.js', import.meta.url))];

/** Output of a finished CLI run. */
export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `agentdb …` to completion with `env`, feeding `input` on stdin. */
export function runCli(args: string[], env: Record<string, string>, input?: string, cwd?: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CLI, ...args], { env: { ...process.env, ...env }, stdio: 'pipe', ...(cwd ? { cwd } : {}) });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    // A command that exits without reading its stdin (most do) closes the pipe: the input's write
    // then fails EPIPE after the fact, under load, which is no fault of the run's (its code and
    // output are what it answered). Any other error of the pipe is the test's.
    child.stdin.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') reject(err);
    });
    child.stdin.end(input ?? '');
  });
}

/** Starts a long-running `agentdb …` (worker, start) and resolves once its log says `ready`, with the log so far. */
export function startCli(args: string[], env: Record<string, string>): Promise<ChildProcess & { readyLog: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CLI, ...args], {
      env: { ...process.env, ...env, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    const onData = (d: Buffer) => {
      log += d;
      if (/"msg":"(worker|agentdb) ready"/.test(log)) {
        child.stderr.off('data', onData);
        child.stderr.resume();
        resolve(Object.assign(child, { readyLog: log }));
      }
    };
    child.stderr.on('data', onData);
    child.stdout.resume();
    child.on('exit', (code) => reject(new Error(`agentdb ${args.join(' ')} exited with ${code}: ${log}`)));
    child.on('error', reject);
  });
}

/** A running `agentdb …` a test talks to while it runs: what it printed so far, and its end. */
export interface LiveCli {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves once stderr matches `pattern`; rejects if the process ends first. */
  stderrMatches(pattern: RegExp): Promise<void>;
  exited: Promise<RunResult>;
}

/** Starts `agentdb …` and hands it over while it runs. */
export function spawnCli(args: string[], env: Record<string, string>): LiveCli {
  const child = spawn(process.execPath, [...CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<RunResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    stderrMatches: (pattern) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (!pattern.test(stderr)) return;
          child.stderr!.off('data', check);
          resolve();
        };
        child.stderr!.on('data', check);
        check();
        void exited.then(() => reject(new Error(`agentdb ${args.join(' ')} ended before stderr matched ${pattern}: ${stderr}`)));
      }),
  };
}

/** Stops a process and waits for it to be gone. */
export function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill(signal);
  });
}

/** Whether `pid` is running: a zombie (ended, not yet reaped) counts as ended. */
export function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'latin1'));
  } catch {
    return false;
  }
}

/** Whether something accepts a TCP connection on 127.0.0.1:`port`. */
export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
