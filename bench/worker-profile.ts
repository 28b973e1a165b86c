// `npm run build && node --import tsx bench/worker-profile.ts`: where the worker's CPU per
// sequential PK read goes, ours beside the executor floor's (raw BullMQ whose worker asks a forked
// child for the row, bench/raw-child-worker.ts), issue 31. Both workers run with `--cpu-prof`;
// only the samples taken while CALLS reads were measured count (V8 stamps them on the monotonic
// clock, as `process.hrtime` does), so start-up and warm-up are left out. Prints each worker's CPU
// per read (/proc) and its functions by self time, in µs per read, the floor's beside ours.
// CALLS (default 3000), CONC (default 1), TOP (default 40), PROF_INTERVAL (µs, default 50), WORKER_BIN as floor.ts.
// KIND=insert: our worker's small insert (bench/small-insert.ts) in the first column instead of
// the floor's read, both from our worker's one profile: what a write costs the worker over a read.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { benchSite } from './agentdb-worker.ts';
import { cpuSeconds } from './cpu.ts';
import { pkReadTable } from './pk-read.ts';
import { rawBullmq } from './raw-bullmq.ts';
import { drive } from './stats.ts';
import { smallInsert } from './small-insert.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const CALLS = Number(process.env.CALLS ?? 3000);
const TOP = Number(process.env.TOP ?? 40);
const INTERVAL = Number(process.env.PROF_INTERVAL ?? 50);
const INSERT = process.env.KIND === 'insert';
// CONC: calls in flight (default 1, sequential); at 64 the worker takes many jobs a turn.
const CONC = Number(process.env.CONC ?? 1);

interface Profile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Self time (µs) by function of the samples of `p` stamped within one of `spans` [from, to] (µs, monotonic). */
function selfTimes(p: Profile, spans: { from: number; to: number }[]): Map<string, number> {
  const fnOf = new Map<number, string>();
  for (const n of p.nodes) {
    const file = n.callFrame.url
      .replace(/^file:\/\//, '')
      .replace(/.*node_modules\//, 'nm/')
      .replace(/.*\/(src|dist)\//, '$1/');
    // BY=file: by file (a package's files as one), not by function.
    const pkg = file.startsWith('nm/')
      ? file
          .split('/')
          .slice(0, file.split('/')[1]!.startsWith('@') ? 3 : 2)
          .join('/')
      : file;
    fnOf.set(
      n.id,
      process.env.BY === 'file' ? pkg || n.callFrame.functionName : `${n.callFrame.functionName || '(anon)'} ${file}:${n.callFrame.lineNumber + 1}`,
    );
  }
  // STACK=<regex>: a function's samples are counted under its callers' chain instead (who calls it).
  const stack = process.env.STACK ? new RegExp(process.env.STACK) : undefined;
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const chain = (id: number) => {
    const names: string[] = [];
    for (let at: number | undefined = id; at !== undefined && names.length < 12; at = parent.get(at)) names.push(fnOf.get(at)!.replace(/ .*\//, ' '));
    return names.join(' < ');
  };
  const inclusive = process.env.INCLUSIVE === '1';
  const out = new Map<string, number>();
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    const next = t + (p.timeDeltas[i + 1] ?? 0);
    if (!spans.some((w) => t >= w.from && t <= w.to)) continue;
    let fn = fnOf.get(p.samples[i]!)!;
    if (fn.startsWith('(idle)')) continue;
    if (inclusive) {
      // INCLUSIVE=1: each function's time with what it calls (each frame once per sample).
      const seen = new Set<string>();
      for (let at: number | undefined = p.samples[i]!; at !== undefined; at = parent.get(at)) seen.add(fnOf.get(at)!);
      for (const f of seen) out.set(f, (out.get(f) ?? 0) + (next - t));
      continue;
    }
    if (stack?.test(fn)) fn = chain(p.samples[i]!);
    out.set(fn, (out.get(fn) ?? 0) + (next - t));
  }
  return out;
}

const dirs = { floor: mkdtempSync(path.join(os.tmpdir(), 'agentdb-wprof-floor-')), ours: mkdtempSync(path.join(os.tmpdir(), 'agentdb-wprof-ours-')) };
const prof = (dir: string) => `--cpu-prof --cpu-prof-dir=${dir} --cpu-prof-interval=${INTERVAL}`;
const site = benchSite(REDIS_URL, 'wprof', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent' });
const worker = await site.worker({ NODE_OPTIONS: prof(dirs.ours) }, process.env.WORKER_BIN);
const saved = process.env.NODE_OPTIONS;
process.env.NODE_OPTIONS = `${saved ?? ''} ${prof(dirs.floor)}`;
const raw = await rawBullmq(REDIS_URL, `${site.config.prefix}-rawc`, 32, true, {
  file: './raw-child-worker.ts',
  args: [path.join(site.config.dataDir, 'raw-child.db')],
});
if (saved === undefined) delete process.env.NODE_OPTIONS;
else process.env.NODE_OPTIONS = saved;
// ROUNDS (default 1): the two sides take turns, CALLS / ROUNDS calls a turn, each going first in turn.
const ROUNDS = Number(process.env.ROUNDS ?? 1);
const windows: Record<string, { spans: { from: number; to: number }[]; cpuMs: number }> = { floor: { spans: [], cpuMs: 0 }, ours: { spans: [], cpuMs: 0 } };
try {
  const ours = await pkReadTable(site.client);
  const floor = INSERT ? { call: await smallInsert(site.client), pid: worker.pid } : { call: (i: number) => raw.call(i).then(() => undefined), pid: raw.pid! };
  const sides = { floor, ours: { call: ours, pid: worker.pid } };
  for (const s of Object.values(sides)) await drive(1000, CONC, s.call);
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? Object.entries(sides) : Object.entries(sides).reverse();
    for (const [k, s] of order) {
      const c0 = cpuSeconds(s.pid);
      const from = Number(process.hrtime.bigint() / 1000n);
      await drive(Math.round(CALLS / ROUNDS), CONC, s.call);
      const to = Number(process.hrtime.bigint() / 1000n);
      windows[k]!.spans.push({ from, to });
      windows[k]!.cpuMs += ((cpuSeconds(s.pid) - c0) * 1000) / CALLS;
    }
  }
} finally {
  await raw.close();
  await worker.stop('SIGTERM');
  await site.close();
}
const times: Record<string, Map<string, number>> = {};
for (const [k, dir] of Object.entries(dirs)) {
  const pid = k === 'ours' || INSERT ? worker.pid : undefined;
  // The worker's profile: ours by its pid; the floor's is the largest (its child's is smaller).
  const from = INSERT ? dirs.ours : dir;
  const files = readdirSync(from)
    .filter((f) => pid === undefined || f.includes(`.${pid}.`))
    .map((f) => path.join(from, f));
  const p = files.map((f) => JSON.parse(readFileSync(f, 'utf8')) as Profile).sort((a, b) => b.samples.length - a.samples.length)[0]!;
  times[k] = selfTimes(p, windows[k]!.spans);
}
if (process.env.KEEP) console.log(JSON.stringify({ kept: dirs }));
else for (const dir of Object.values(dirs)) rmSync(dir, { recursive: true, force: true });
const perRead = (m: Map<string, number>, fn: string) => (m.get(fn) ?? 0) / CALLS;
const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0) / CALLS;
console.log(
  JSON.stringify({
    calls: CALLS,
    cpuMsPerRead: { floor: +windows.floor!.cpuMs.toFixed(3), ours: +windows.ours!.cpuMs.toFixed(3) },
    sampledUsPerRead: { floor: +total(times.floor!).toFixed(1), ours: +total(times.ours!).toFixed(1) },
  }),
);
const fns = new Set([...times.floor!.keys(), ...times.ours!.keys()]);
const rows = [...fns].map((fn) => ({ fn, floor: perRead(times.floor!, fn), ours: perRead(times.ours!, fn) }));
console.log('   floor     ours   µs per read, self');
for (const r of rows.sort((a, b) => b.ours - a.ours).slice(0, TOP))
  console.log(`${r.floor.toFixed(1).padStart(7)}  ${r.ours.toFixed(1).padStart(7)}   ${r.fn}`);
