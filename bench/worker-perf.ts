// `npm run build && node --import tsx bench/worker-perf.ts`: where the worker's CPU per PK read
// goes, by on-CPU samples (`perf record -e cpu-clock`, needs perf and root or
// perf_event_paranoid ≤ 1), ours beside the executor floor's (raw BullMQ whose worker asks a
// forked child for the row, bench/raw-child-worker.ts), issue 31. worker-profile.ts's V8 profile
// samples wall time: on a loaded machine a worker preempted inside a system call is charged
// there (a write to the child or to Redis read 3× the floor's under load 17), so its shares
// follow the load. perf counts only the time the worker ran, kernel included, by symbol
// (JIT code named through `--perf-basic-prof`). Prints each side's CPU per read (/proc) and
// the top symbols in µs per read, the floor's beside ours, each side's samples scaled to its
// measured CPU. CALLS (default 10000), CONC (default 64), ROUNDS (default 4), TOP (default 60),
// WORKER_BIN as floor.ts, REDIS_URL (a Redis of the run's own). KEEP=1 keeps the recordings.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { benchSite } from './agentdb-worker.ts';
import { childPids, cpuSeconds } from './cpu.ts';
import { pkReadTable } from './pk-read.ts';
import { rawBullmq } from './raw-bullmq.ts';
import { smallInsert } from './small-insert.ts';
import { drive } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const CALLS = Number(process.env.CALLS ?? 10000);
const CONC = Number(process.env.CONC ?? 64);
const ROUNDS = Number(process.env.ROUNDS ?? 4);
const TOP = Number(process.env.TOP ?? 60);
const dir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-wperf-'));
const PERF_FLAGS = '--perf-basic-prof-only-functions';
// INCLUSIVE=1: stacks too (frame pointers), and each symbol's time with what it calls.
// BY=owner: stacks too, and each sample charged to the JavaScript it ran for: the first JS frame
// from the leaf (V8's builtins, the runtime and the kernel's work under a system call are that
// frame's), by file of src/ or by package; samples with no JS frame by kind (GC, compiler, other).
const OWNER = process.env.BY === 'owner';
const INCLUSIVE = process.env.INCLUSIVE === '1';

const site = benchSite(REDIS_URL, 'wperf', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent' });
const worker = await site.worker({ NODE_OPTIONS: PERF_FLAGS }, process.env.WORKER_BIN);
const saved = process.env.NODE_OPTIONS;
process.env.NODE_OPTIONS = `${saved ?? ''} ${PERF_FLAGS}`;
const raw = await rawBullmq(REDIS_URL, `${site.config.prefix}-rawc`, 32, true, {
  file: './raw-child-worker.ts',
  args: [path.join(site.config.dataDir, 'raw-child.db')],
});
if (saved === undefined) delete process.env.NODE_OPTIONS;
else process.env.NODE_OPTIONS = saved;

/** Records `pid` on-CPU until the returned stop is called. */
function record(pid: number, file: string): () => Promise<void> {
  const p = spawn('perf', ['record', '-q', '-e', 'cpu-clock', '-F', '4000', ...(INCLUSIVE || OWNER ? ['-g'] : []), '-p', traced(pid).join(','), '-o', file], {
    stdio: 'ignore',
  });
  return () =>
    new Promise((resolve) => {
      p.once('exit', () => resolve());
      p.kill('SIGINT');
    });
}

// KIND=insert: our read in the first column and our small insert (bench/small-insert.ts, history on)
// in the second, both through the one worker: what a write costs over a read. CHILD=1: the
// executor children instead of the workers (the floor's forked child beside ours), their CPU summed.
const insert = process.env.KIND === 'insert';
const ourRead = await pkReadTable(site.client);
const sides = {
  floor: insert
    ? { call: ourRead, pid: worker.pid, cpuMs: 0, files: [] as { file: string; cpuMs: number }[] }
    : { call: (i: number) => raw.call(i).then(() => undefined), pid: raw.pid!, cpuMs: 0, files: [] as { file: string; cpuMs: number }[] },
  ours: { call: insert ? await smallInsert(site.client) : ourRead, pid: worker.pid, cpuMs: 0, files: [] as { file: string; cpuMs: number }[] },
};
const traced = (pid: number) => (process.env.CHILD === '1' ? childPids(pid) : [pid]);
const cpuOf = (pid: number) => traced(pid).reduce((n, p) => n + cpuSeconds(p), 0);
try {
  // Long enough that V8 has optimized what it will: its compiler's threads count in a process's CPU.
  for (const s of Object.values(sides)) await drive(Number(process.env.WARM ?? 6000), CONC, s.call);
  for (let r = 0; r < ROUNDS; r++) {
    for (const [k, s] of r % 2 === 0 ? Object.entries(sides) : Object.entries(sides).reverse()) {
      const file = path.join(dir, `${k}-${r}.data`);
      const stop = record(s.pid, file);
      // perf needs a moment to attach; the samples are scaled to the CPU measured below anyway.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const c0 = cpuOf(s.pid);
      await drive(Math.round(CALLS / ROUNDS), CONC, s.call);
      // This round's CPU, as ms per read of the whole run: the rounds' add up to the run's.
      const cpuMs = ((cpuOf(s.pid) - c0) * 1000) / CALLS;
      s.cpuMs += cpuMs;
      await stop();
      s.files.push({ file, cpuMs });
    }
  }
} finally {
  await raw.close();
  await worker.stop('SIGTERM');
  await site.close();
}

/** µs of CPU per read by symbol (or library) over a side's recordings: each round's share of samples times its CPU. */
function symbols(files: { file: string; cpuMs: number }[], byDso: boolean): Map<string, number> {
  const out = new Map<string, number>();
  for (const { file, cpuMs } of files) {
    const r = spawnSync(
      'perf',
      [
        'report',
        '-i',
        file,
        '--stdio',
        INCLUSIVE ? '--children' : '--no-children',
        '-g',
        'none',
        '-F',
        `${INCLUSIVE ? 'overhead_children' : 'overhead'},dso,sym`,
        '-q',
      ],
      {
        encoding: 'utf8',
        maxBuffer: 1 << 28,
      },
    );
    for (const line of r.stdout.split('\n')) {
      const m = /^\s*([\d.]+)%\s+(\S+)\s+(.*)$/.exec(line);
      if (!m) continue;
      const dso = m[2]!.replace(/\/tmp\/perf-\d+\.map|\[JIT\]/, 'jit');
      const sym = m[3]!
        .replace(/^tid \d+\s+/, '')
        .replace(/^\[[.kjH]\]\s*/, '')
        .replace(/^JS:[*+~^]?/, '')
        .replace(/file:\/\/|\/work\/\S+?\/(node_modules|dist)\//g, '')
        .trim();
      const name = byDso ? dso : `${sym} (${dso})`;
      out.set(name, (out.get(name) ?? 0) + Number(m[1]) * 10 * cpuMs);
    }
  }
  return out;
}
/** Who a sample's frames (leaf first) ran for: see BY=owner. */
function ownerOf(frames: string[]): string {
  for (const f of frames) {
    const js = /JS:\S*\s*'?(\S+?)(?::\d+:\d+)?$/.exec(f);
    if (!js) continue;
    const at = f.slice(f.indexOf('JS:'));
    const ours = /\/(?:dist\/)?src\/(\S+?\.[jt]s)/.exec(at);
    if (ours) return `src/${ours[1]}`;
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(at);
    if (pkg) return pkg[1]!;
    const bench = /\/(bench\/\S+?\.ts)/.exec(at);
    if (bench) return bench[1]!;
    const node = /(node:\S+?):\d+/.exec(at);
    if (node) return node[1]!;
    return 'JS (other)';
  }
  const all = frames.join(' ');
  if (/Scavenge|MarkCompact|Heap::|Marking|Sweeper|GarbageCollect|EphemeronRemembered/.test(all)) return '(GC)';
  if (/Compil|compiler::|Turbofan|Maglev/.test(all)) return '(V8 compiler)';
  if (/uv__io_poll|uv_run/.test(all)) return '(event loop)';
  return '(other)';
}

/** µs of CPU per read by owner over a side's recordings, as {@link symbols} by symbol. */
function owners(files: { file: string; cpuMs: number }[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const { file, cpuMs } of files) {
    const r = spawnSync('perf', ['script', '-i', file, '-F', 'ip,sym'], { encoding: 'utf8', maxBuffer: 1 << 30 });
    const counts = new Map<string, number>();
    let total = 0;
    for (const sample of r.stdout.split(/\n\s*\n/)) {
      const frames = sample
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean);
      if (!frames.length) continue;
      const o = ownerOf(frames);
      counts.set(o, (counts.get(o) ?? 0) + 1);
      total++;
    }
    for (const [o, n] of counts) out.set(o, (out.get(o) ?? 0) + (n / total) * cpuMs * 1000);
  }
  return out;
}

console.log(
  JSON.stringify({
    calls: CALLS,
    conc: CONC,
    load: os.loadavg()[0],
    cpuMsPerRead: { floor: +sides.floor.cpuMs.toFixed(3), ours: +sides.ours.cpuMs.toFixed(3) },
  }),
);
for (const [byDso, top] of INCLUSIVE || OWNER
  ? ([[false, TOP]] as const)
  : ([
      [true, 12],
      [false, TOP],
    ] as const)) {
  const perRead: Record<string, Map<string, number>> = {};
  if (OWNER) for (const [k, s] of Object.entries(sides)) perRead[k] = owners(s.files);
  else
    for (const [k, s] of Object.entries(sides)) {
      perRead[k] = symbols(s.files, byDso);
    }
  const names = new Set([...perRead.floor!.keys(), ...perRead.ours!.keys()]);
  const rows = [...names].map((n) => ({ n, floor: perRead.floor!.get(n) ?? 0, ours: perRead.ours!.get(n) ?? 0 }));
  console.log(`   floor     ours   µs per read (on CPU), by ${OWNER ? 'owner' : byDso ? 'library' : 'symbol'}, ours − floor first`);
  for (const r of rows.sort((a, b) => b.ours - b.floor - (a.ours - a.floor)).slice(0, top))
    console.log(`${r.floor.toFixed(1).padStart(7)}  ${r.ours.toFixed(1).padStart(7)}   ${r.n}`);
}
if (process.env.KEEP) console.log(JSON.stringify({ kept: dir }));
else rmSync(dir, { recursive: true, force: true });
