// `npm run build && node --import tsx bench/worker-syscalls.ts [bin/agentdb.js]`: the system calls
// an `agentdb worker` makes per PK read (`strace -c` attached to it after a warm-up; needs strace),
// of this checkout's build or the one given (issue 31). Unlike its CPU or wall time, the count
// holds on a loaded machine: each write to Redis or the child is a system call that wakes it.
// CALLS (default 1000), CONC (calls in flight, default 1). KIND=insert: bench/small-insert.ts's
// insert instead of the read. RAW=1: the executor floor's worker instead (raw BullMQ whose worker
// asks a forked child for the row, bench/raw-child-worker.ts), for what ours does beyond it.
// CHILD=1: the worker's executor children's system calls instead of the worker's. REDIS_URL: a Redis of the run's own.
// STRACE_F=1: `strace -f`, every thread of the processes traced too (libuv's pool, a child's kept threads).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { benchSite } from './agentdb-worker.ts';
import { childPids } from './cpu.ts';
import { pkReadTable } from './pk-read.ts';
import { rawBullmq } from './raw-bullmq.ts';
import { smallInsert } from './small-insert.ts';
import { drive } from './stats.ts';
const bin = path.resolve(process.argv[2] ?? 'dist/bin/agentdb.js');
const CALLS = Number(process.env.CALLS ?? 1000);
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const site = benchSite(REDIS_URL, 'sys', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent' });
const raw = process.env.RAW === '1';
const rawChild = raw
  ? await rawBullmq(REDIS_URL, `${site.config.prefix}-rawc`, 32, true, {
      file: './raw-child-worker.ts',
      args: [path.join(site.config.dataDir, 'raw-child.db')],
    })
  : undefined;
const pid = rawChild ? rawChild.pid! : (await site.worker({}, bin)).pid;
try {
  const q = rawChild
    ? (i: number) => rawChild.call(i).then(() => undefined)
    : process.env.KIND === 'insert'
      ? await smallInsert(site.client)
      : await pkReadTable(site.client);
  await drive(500, 1, q);
  // CHILD=1: the worker's executor children instead (all of them, counted together).
  const traced = process.env.CHILD === '1' ? childPids(pid) : [pid];
  const st = spawn('strace', ['-c', '-q', ...(process.env.STRACE_F ? ['-f'] : []), ...traced.flatMap((p) => ['-p', String(p)])], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let out = '';
  st.stderr.on('data', (d) => (out += d));
  await new Promise((r) => setTimeout(r, 500));
  await drive(CALLS, Number(process.env.CONC ?? 1), q);
  st.kill('SIGINT');
  await new Promise((r) => st.once('exit', r));
  for (const line of out.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 5 && /^\d/.test(f[0]!) && Number(f[3]) > 0) console.log(`${f[f.length - 1]!.padEnd(16)} ${(Number(f[3]) / CALLS).toFixed(2)} per read`);
  }
} finally {
  await rawChild?.close();
  await site.close();
}
