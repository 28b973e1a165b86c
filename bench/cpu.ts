// CPU and memory of the processes a benchmark runs, read from /proc (Linux).
import { readdirSync, readFileSync } from 'node:fs';
import { round } from './stats.ts';

/** Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux). */
const HZ = 100;

/** CPU seconds (user + system) a live process has used; 0 once it is gone. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which may hold spaces: state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / HZ;
  } catch {
    return 0;
  }
}

/**
 * CPU seconds a live process's threads have run, to the nanosecond: the scheduler's own count
 * (/proc/<pid>/task/<tid>/schedstat, its first field), summed over the threads alive now. /proc's
 * stat counts in clock ticks (10 ms): 1,000 reads of a child at ~0.1 ms each are ~10 ticks, so a
 * cut of a few µs a read could not show. A thread that ended between two readings drops out of the
 * second (not so for a worker's or a child's threads, which live as long as the process). 0 once gone.
 */
export function cpuSecondsFine(pid: number): number {
  try {
    let ns = 0;
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        // the thread ended as it was read
      }
    }
    return ns / 1e9;
  } catch {
    return 0;
  }
}

/** Resident memory of a live process, in MB. */
export function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? round(Number(m[1]) / 1024, 1) : NaN;
  } catch {
    return NaN;
  }
}

/** The direct children of a process (its executor children, for a worker). */
export function childPids(pid: number): number[] {
  const pids: number[] = [];
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    const list = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
    if (list) pids.push(...list.split(' ').map(Number));
  }
  return pids;
}

/** The whole machine's CPU seconds, busy and in total (all cores), from /proc/stat. */
export function machineCpu(): { busy: number; total: number } {
  const [, ...ticks] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
  const n = ticks.map(Number);
  const total = n.reduce((a, b) => a + b, 0);
  const idle = n[3]! + n[4]!; // idle + iowait
  return { busy: (total - idle) / HZ, total: total / HZ };
}

/** Read and write system calls a live process has made (/proc/<pid>/io: syscr, syscw); 0 once it is gone. */
export function syscalls(pid: number): { reads: number; writes: number } {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const f = (name: string) => Number(new RegExp(`^${name}: (\\d+)`, 'm').exec(io)?.[1] ?? 0);
    return { reads: f('syscr'), writes: f('syscw') };
  } catch {
    return { reads: 0, writes: 0 };
  }
}
