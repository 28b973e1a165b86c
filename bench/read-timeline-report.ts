// Reads what bench/read-timeline.ts left (OUT, default /tmp/read-timeline) and prints, per side, the
// wall-clock path of a sequential read hop by hop (`node --import tsx bench/read-timeline-report.ts`):
// each process's time on the path between reading what woke it and writing what wakes the next
// (caller → Redis → worker → Redis → worker → child → worker → Redis → caller), each hop from the
// write to the read at the other end, whether the receiver slept (a wake-up), each process's on-CPU
// time over the whole call beside its time on the path, and the system calls inside each segment.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const OUT = process.env.OUT ?? '/tmp/read-timeline';
type Side = { worker: number; children: number[] };
const run = JSON.parse(readFileSync(path.join(OUT, 'run.json'), 'utf8')) as {
  pids: { caller: number; redis: number; floor: Side; ours: Side };
  sockets: Record<string, Record<string, string>>;
  tcp: string;
  unix: string;
  calls: { side: 'floor' | 'ours'; start: string; end: string }[];
};
const { pids } = run;

// Each socket's other end: TCP by the two ports, a Unix pair by `ss`'s peer inode.
const owner = new Map<number, [pid: number, fd: number]>();
const inodeOf = new Map<string, number>();
for (const [pid, fds] of Object.entries(run.sockets)) {
  for (const [fd, link] of Object.entries(fds)) {
    const m = /socket:\[(\d+)\]/.exec(link);
    if (!m) continue;
    inodeOf.set(`${pid}/${fd}`, Number(m[1]));
    owner.set(Number(m[1]), [Number(pid), Number(fd)]);
  }
}
const peer = new Map<number, number>();
const byPorts = new Map<string, number>();
for (const line of run.tcp.split('\n').slice(1)) {
  const f = line.trim().split(/\s+/);
  if (f.length < 10 || !f[0]!.endsWith(':') || f[0] === 'sl') continue;
  const port = (a: string) => parseInt(a.split(':')[1]!, 16);
  if (Number(f[9])) byPorts.set(`${port(f[1]!)}-${port(f[2]!)}`, Number(f[9]));
}
for (const [k, ino] of byPorts) {
  const [l, r] = k.split('-');
  const other = byPorts.get(`${r}-${l}`);
  if (other) peer.set(ino, other);
}
for (const line of run.unix.split('\n').slice(1)) {
  const f = line.trim().split(/\s+/);
  const a = Number(f[f.length - 3]);
  const b = Number(f[f.length - 1]);
  if (a && b) peer.set(a, b);
}
const peerOf = (pid: number, fd: number) => {
  const ino = inodeOf.get(`${pid}/${fd}`);
  const p = ino === undefined ? undefined : peer.get(ino);
  return p === undefined ? undefined : owner.get(p);
};

const WRITES = new Set([1, 20, 44, 46]); // write, writev, sendto, sendmsg
const READS = new Set([0, 19, 45, 47]); // read, readv, recvfrom, recvmsg
const NAMES: Record<number, string> = {
  0: 'read',
  1: 'write',
  20: 'writev',
  47: 'recvmsg',
  232: 'epoll_wait',
  281: 'epoll_pwait',
  18: 'pwrite',
  98: 'getrusage',
  72: 'fcntl',
};

type Io = { t: number; kind: 'r' | 'w'; fd: number };
const io = new Map<number, Io[]>();
const calls = new Map<number, { t: number; nr: number }[]>();
const wakes = new Map<number, number[]>();
const ins = new Map<number, number[]>();
const outs = new Map<number, number[]>();
const lastEnter = new Map<number, { nr: number; fd: number }>();
const push = <T>(m: Map<number, T[]>, k: number, v: T) => (m.get(k) ?? m.set(k, []).get(k)!).push(v);
const script = execFileSync('perf', ['script', '-i', path.join(OUT, 'perf.data'), '--ns', '-F', 'pid,tid,time,event,trace'], {
  encoding: 'utf8',
  maxBuffer: 2 ** 31,
  stdio: ['ignore', 'pipe', 'ignore'],
});
for (const line of script.split('\n')) {
  const m = /^\s*(\d+)\/(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)$/.exec(line);
  if (!m) continue;
  const [pid, tid, t, event, trace] = [Number(m[1]), Number(m[2]), Number(m[3]), m[4]!, m[5]!];
  if (event === 'sched:sched_wakeup') push(wakes, Number(/ pid=(\d+)/.exec(trace)![1]), t);
  else if (event === 'sched:sched_switch') {
    push(ins, Number(/next_pid=(\d+)/.exec(trace)![1]), t);
    push(outs, Number(/prev_pid=(\d+)/.exec(trace)![1]), t);
  } else if (pid !== tid) continue;
  else if (event === 'raw_syscalls:sys_enter') {
    const e = /NR (\d+) \(([0-9a-f]+)/.exec(trace);
    if (!e) continue;
    const nr = Number(e[1]);
    const fd = parseInt(e[2]!, 16);
    lastEnter.set(pid, { nr, fd });
    push(calls, pid, { t, nr });
    if (WRITES.has(nr)) push(io, pid, { t, kind: 'w', fd });
  } else if (event === 'raw_syscalls:sys_exit') {
    const e = /NR (\d+) = (-?\d+)/.exec(trace);
    const enter = lastEnter.get(pid);
    if (e && READS.has(Number(e[1])) && Number(e[2]) > 0 && enter?.nr === Number(e[1])) push(io, pid, { t, kind: 'r', fd: enter.fd });
  }
}

/** The index of the first element of sorted `xs` above `t`. */
const after = (xs: number[], t: number) => {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]! <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
};
const ioTimes = new Map([...io].map(([p, xs]) => [p, xs.map((x) => x.t)]));
const first = (pid: number, t: number, kind: 'r' | 'w', ok: (fd: number) => boolean) =>
  (io.get(pid) ?? []).slice(after(ioTimes.get(pid) ?? [], t)).find((x) => x.kind === kind && ok(x.fd));

/** A process's main thread's on-CPU time within [a, b], from the switches onto and off it. */
const busy = (pid: number, a: number, b: number) => {
  const on = ins.get(pid) ?? [];
  const off = outs.get(pid) ?? [];
  const i = after(on, a);
  const o = after(off, a);
  const events = [...on.slice(i, after(on, b)).map((t) => [t, 1]), ...off.slice(o, after(off, b)).map((t) => [t, 0])].sort((x, y) => x[0]! - y[0]!);
  let since = (on[i - 1] ?? -1) > (off[o - 1] ?? -1) ? a : undefined;
  let total = 0;
  for (const [t, isOn] of events) {
    if (isOn && since === undefined) since = t!;
    else if (!isOn && since !== undefined) {
      total += t! - since;
      since = undefined;
    }
  }
  return total + (since === undefined ? 0 : b - since);
};

const SEGMENTS = [
  'caller: start → add',
  'hop caller → Redis',
  'Redis: the add',
  'hop Redis → worker (wake)',
  'worker: wake → take',
  'hop worker → Redis',
  'Redis: the take',
  'hop Redis → worker',
  'worker: job → child',
  'hop worker → child',
  'child: the read',
  'hop child → worker',
  'worker: answer → finish',
  'hop worker → Redis',
  'Redis: the finish',
  'hop Redis → caller (event)',
  'caller: event → answer',
];
type Traced = { segs: number[]; asleep: boolean[]; inside: Map<number, number>[] };
/** One call's path, or undefined when one of its hops is not in the trace. */
function trace(call: (typeof run.calls)[number]): Traced | undefined {
  const side = pids[call.side];
  const kids = new Set(side.children);
  const [C, R, W] = [pids.caller, pids.redis, side.worker];
  const t0 = Number(call.start) / 1e9;
  const end = Number(call.end) / 1e9;
  const roles: [number | 'child', number | 'child'][] = [
    [C, R],
    [R, W],
    [W, R],
    [R, W],
    [W, 'child'],
    ['child', W],
    [W, R],
    [R, C],
  ];
  const marks = [t0];
  const holders = [C];
  const asleep: boolean[] = [];
  let at = { pid: C, t: t0 };
  for (const [, to] of roles) {
    const w = first(at.pid, at.t, 'w', (fd) => {
      const o = peerOf(at.pid, fd);
      return o !== undefined && (to === 'child' ? kids.has(o[0]) : o[0] === to);
    });
    if (!w || w.t > end) return undefined;
    const [dest, destFd] = peerOf(at.pid, w.fd)!;
    const r = first(dest, w.t, 'r', (fd) => fd === destFd);
    if (!r || r.t > end + 0.001) return undefined;
    const on = ins.get(dest) ?? [];
    asleep.push((on[after(on, r.t) - 1] ?? 0) > w.t);
    marks.push(w.t, r.t);
    holders.push(dest);
    at = { pid: dest, t: r.t };
  }
  marks.push(end);
  const inside = holders.map((pid, k) => {
    const counts = new Map<number, number>();
    for (const c of calls.get(pid) ?? []) if (c.t > marks[2 * k]! && c.t < marks[2 * k + 1]!) counts.set(c.nr, (counts.get(c.nr) ?? 0) + 1);
    return counts;
  });
  return { segs: marks.slice(1).map((t, i) => t - marks[i]!), asleep, inside };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const us = (s: number) => (s * 1e6).toFixed(1);
const traced = { floor: [] as Traced[], ours: [] as Traced[] };
const missed = { floor: 0, ours: 0 };
for (const c of run.calls) {
  const t = trace(c);
  if (t) traced[c.side].push(t);
  else missed[c.side]++;
}
console.log(`calls traced: floor ${traced.floor.length} (${missed.floor} not), ours ${traced.ours.length} (${missed.ours} not); µs, medians`);
console.log(`| segment | floor | ours | ours − floor |\n| --- | --- | --- | --- |`);
SEGMENTS.forEach((name, i) => {
  const [f, o] = [median(traced.floor.map((x) => x.segs[i]!)), median(traced.ours.map((x) => x.segs[i]!))];
  console.log(`| ${name} | ${us(f)} | ${us(o)} | ${us(o - f)} |`);
});
const total = (side: 'floor' | 'ours', idx: number[]) => median(traced[side].map((x) => idx.reduce((s, i) => s + x.segs[i]!, 0)));
const all = SEGMENTS.map((_, i) => i);
console.log(`| the call | ${us(total('floor', all))} | ${us(total('ours', all))} | |`);
for (const side of ['floor', 'ours'] as const) {
  const asleep = traced[side][0]!.asleep.map((_, h) => (traced[side].filter((x) => x.asleep[h]).length / traced[side].length).toFixed(2));
  const path = { caller: [0, 16], redis: [2, 6, 14], worker: [4, 8, 12], child: [10] };
  const hops = [1, 3, 5, 7, 9, 11, 13, 15];
  const windows = run.calls.filter((c) => c.side === side).map((c) => [Number(c.start) / 1e9, Number(c.end) / 1e9] as const);
  const cpu = (ps: number[]) => us(median(windows.map(([a, b]) => ps.reduce((s, p) => s + busy(p, a, b), 0))));
  console.log(`\n${side}: receiver asleep at each hop (share of calls): ${asleep.join(' ')}`);
  console.log(
    `${side}: on-CPU a call (whole call) · on the path: caller ${cpu([pids.caller])} · ${us(total(side, path.caller))}, Redis ${cpu([pids.redis])} · ${us(total(side, path.redis))}, worker ${cpu([pids[side].worker])} · ${us(total(side, path.worker))}, children ${cpu(pids[side].children)} · ${us(total(side, path.child))}; hops ${us(total(side, hops))}`,
  );
  const inProcess = [0, 2, 4, 6, 8, 10, 12, 14, 16];
  console.log(`${side}: system calls a call inside each process's segment (mean):`);
  inProcess.forEach((seg, k) => {
    const sum = new Map<number, number>();
    for (const x of traced[side]) for (const [nr, n] of x.inside[k]!) sum.set(nr, (sum.get(nr) ?? 0) + n);
    const shown = [...sum].filter(([, n]) => n / traced[side].length >= 0.05).map(([nr, n]) => `${NAMES[nr] ?? nr} ${(n / traced[side].length).toFixed(2)}`);
    console.log(`  ${SEGMENTS[seg]}: ${shown.join(', ') || '–'}`);
  });
}
