// The wall-clock path of one sequential PK read, ours against the floor's (raw BullMQ whose worker
// asks a forked child), hop by hop, from the kernel's scheduler and system-call tracepoints
// (`npm run build && node --import tsx bench/read-timeline.ts`, as root, with `perf`).
// Each side is warmed, then `perf record -k CLOCK_MONOTONIC` follows the caller (this process),
// the side's worker, its children and Redis while ROUNDS × SEQ sequential reads run, the sides
// taking turns; each call's start and end are stamped on the same clock (process.hrtime).
// bench/read-timeline-report.ts reads what this leaves in OUT (default /tmp/read-timeline).
// REDIS_URL should name a Redis of the run's own (its pid is read from INFO: it must be local).
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { baseCaller, benchSite } from './agentdb-worker.ts';
import { childPids } from './cpu.ts';
import { pkRead, pkReadTable } from './pk-read.ts';
import { rawBullmq } from './raw-bullmq.ts';
import { drive } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const SEQ = Number(process.env.BENCH_SEQ_CALLS ?? 400);
const OUT = process.env.OUT ?? '/tmp/read-timeline';
mkdirSync(OUT, { recursive: true });

const site = benchSite(REDIS_URL, 'timeline', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent', REDIS_BYTES_PER_WORKSPACE: String(2 ** 40) });
const worker = await site.worker({}, process.env.WORKER_BIN);
const rawChild = await rawBullmq(REDIS_URL, `${site.config.prefix}-rawc`, 32, true, {
  file: './raw-child-worker.ts',
  args: [path.join(site.config.dataDir, 'raw-child.db')],
});
const admin = new Redis(REDIS_URL);
const self = await baseCaller(site, 'CALLER_THIS');
const redisPid = Number(/process_id:(\d+)/.exec(await admin.info('server'))?.[1]);

/** Each socket's inode by descriptor, for the report to pair a write with the read at its other end. */
const fds = (pid: number) => {
  const out: Record<string, string> = {};
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      out[fd] = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      // closed meanwhile
    }
  }
  return out;
};
try {
  const ours = await pkReadTable(site.client);
  const sides = {
    floor: { call: (i: number) => rawChild.call(i).then(() => undefined), pid: rawChild.pid! },
    ours: { call: self ? pkRead(self) : ours, pid: worker.pid },
  };
  for (const s of Object.values(sides)) {
    await drive(1000, 1, s.call);
    await drive(Number(process.env.BENCH_WARM_CONC_CALLS ?? 10000), 64, s.call);
    await drive(1000, 1, s.call);
  }
  const pids = {
    caller: process.pid,
    redis: redisPid,
    floor: { worker: sides.floor.pid, children: childPids(sides.floor.pid) },
    ours: { worker: sides.ours.pid, children: childPids(sides.ours.pid) },
  };
  const all = [pids.caller, pids.redis, pids.floor.worker, ...pids.floor.children, pids.ours.worker, ...pids.ours.children];
  // RT=1: every process of the run at a real-time priority for the measured window only, so that
  // other processes' load on a shared machine does not queue its wake-ups (as on a quiet one).
  const priority = (policy: string[]) => {
    for (const p of all) execFileSync('chrt', ['-a', ...policy, '-p', ...(policy[0] === '-o' ? ['0'] : ['10']), String(p)]);
  };
  if (process.env.RT === '1') priority(['-f']);
  const only = all.map((p) => `common_pid == ${p}`).join(' || ');
  const perf = spawn(
    'perf',
    [
      'record',
      '-q',
      '-m',
      '2048',
      '-k',
      'CLOCK_MONOTONIC',
      // The scheduler's events of every CPU (a switch onto one of ours from another process is
      // recorded in that process's context); system calls of the processes' main threads only.
      '-a',
      '-e',
      'sched:sched_switch',
      '-e',
      'sched:sched_wakeup',
      '-e',
      'raw_syscalls:sys_enter',
      '--filter',
      only,
      '-e',
      'raw_syscalls:sys_exit',
      '--filter',
      only,
      '-o',
      path.join(OUT, 'perf.data'),
    ],
    { stdio: 'inherit' },
  );
  // perf needs a moment to attach to every thread; a call before it would be missing hops.
  await new Promise((r) => setTimeout(r, 1500));
  const calls: { side: string; round: number; start: string; end: string }[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (const [side, s] of r % 2 ? Object.entries(sides).reverse() : Object.entries(sides)) {
      for (let i = 0; i < SEQ; i++) {
        const start = process.hrtime.bigint();
        await s.call(i);
        calls.push({ side, round: r, start: String(start), end: String(process.hrtime.bigint()) });
      }
    }
  }
  if (process.env.RT === '1') priority(['-o']);
  perf.kill('SIGINT');
  await new Promise((r) => perf.once('exit', r));
  const sockets = Object.fromEntries(all.map((p) => [p, fds(p)]));
  // Which socket is whose other end: TCP by ports, a Unix pair (the IPC channel) by `ss`'s peer inode.
  const tcp = readFileSync('/proc/net/tcp', 'utf8') + readFileSync('/proc/net/tcp6', 'utf8');
  const unix = execFileSync('ss', ['-xa'], { encoding: 'utf8' });
  writeFileSync(path.join(OUT, 'run.json'), JSON.stringify({ pids, sockets, tcp, unix, calls }));
  console.log(JSON.stringify({ out: OUT, pids, calls: calls.length }));
} finally {
  await self?.close();
  admin.disconnect();
  await rawChild.close();
  await site.close();
}
