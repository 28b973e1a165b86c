import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../bin/agentdb.js', import.meta.url));

/** Output of a finished CLI run. */
export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `agentdb …` to completion with `env`, feeding `input` on stdin. */
export function runCli(args: string[], env: Record<string, string>, input?: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input ?? '');
  });
}

/** Starts a long-running `agentdb …` (worker, start) and resolves once its log says `ready`. */
export function startCli(args: string[], env: Record<string, string>): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    const onData = (d: Buffer) => {
      log += d;
      if (/"msg":"(worker|agentdb) ready"/.test(log)) {
        child.stderr.off('data', onData);
        child.stderr.resume();
        resolve(child);
      }
    };
    child.stderr.on('data', onData);
    child.stdout.resume();
    child.on('exit', (code) => reject(new Error(`agentdb ${args.join(' ')} exited with ${code}: ${log}`)));
    child.on('error', reject);
  });
}

/** Stops a process and waits for it to be gone. */
export function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill(signal);
  });
}
