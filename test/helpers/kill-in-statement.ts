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
