import fs from 'node:fs';
import { expect } from 'vitest';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';

/** CPU time a process has used, in clock ticks (user + system, from /proc). */
export function cpuTicks(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/**
 * SIGKILLs the pool's first executor child once it burns CPU on the call in hand, as an operator
 * or the OOM killer would from outside (killed before it read the call, the call would rightly
 * run on the next child); resolves with the pid killed. `cpuWaitMs`: how long it may take to start.
 */
export async function killInStatement(worker: ShardWorkerPool, cpuWaitMs = 10_000): Promise<number> {
  await expect.poll(() => worker.executorPids[0], { interval: 5, timeout: 10_000 }).toBeDefined();
  const pid = worker.executorPids[0]!;
  const before = cpuTicks(pid);
  await expect.poll(() => cpuTicks(pid) - before, { interval: 5, timeout: cpuWaitMs }).toBeGreaterThanOrEqual(5);
  process.kill(pid, 'SIGKILL');
  return pid;
}

/** The child processes of process `pid` (every thread's children, from /proc): a worker's executor children. */
export function childrenOf(pid: number): number[] {
  const pids: number[] = [];
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    const text = fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
    if (text) pids.push(...text.split(/\s+/).map(Number));
  }
  return pids;
}

/** Whether process `pid` holds `file` open (a child that opened the database it runs on; false once it is gone). */
export function holds(pid: number, file: string): boolean {
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === file;
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

/**
 * SIGKILLs, from outside, the child of worker process `workerPid` that has database `file` open
 * and burns CPU on a statement (a child starting burns CPU too, but has no database open yet);
 * resolves with the pid killed.
 */
export async function killChildInStatement(workerPid: number, file: string, cpuWaitMs = 20_000): Promise<number> {
  const before = new Map<number, number>();
  let busy: number | undefined;
  await expect
    .poll(
      () => {
        for (const pid of childrenOf(workerPid)) {
          if (!holds(pid, file)) continue;
          let now: number;
          try {
            now = cpuTicks(pid);
          } catch {
            continue;
          }
          const first = before.get(pid);
          if (first === undefined) before.set(pid, now);
          else if (now - first >= 5) busy = pid;
        }
        return busy;
      },
      { interval: 5, timeout: cpuWaitMs },
    )
    .toBeDefined();
  process.kill(busy!, 'SIGKILL');
  return busy!;
}
