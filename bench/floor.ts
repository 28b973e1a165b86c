// The executor design's floor beside ours (`npm run build && node --import tsx bench/floor.ts`):
// raw BullMQ (no-op worker), raw BullMQ whose worker asks a forked child for the row
// (bench/raw-child-worker.ts) and agentdb's PK read, in interleaved rounds, sequential and
// 64 in flight, with each process's CPU per call (caller, worker, the worker's children).
// BENCH_ROUNDS (default 3), BENCH_SEQ_CALLS (2000), BENCH_CONC_CALLS (5000), WORKER_BIN as query-only.ts.
// Redis's own CPU too (INFO cpu): µs per call and the share of its one core it kept busy; only
// meaningful with REDIS_URL pointing at a Redis of the run's own (others' load would count).
// CALLER_BASE: another build's dist/src/index.js, whose client reads too (`oursBase`, the same
// worker), before this checkout's in odd rounds and after it in even ones: an A/B of the caller.
// CALLER_THIS: this checkout's build (dist/src/index.js) for `ours`, so that both sides run built code.
import path from 'node:path';
import { Redis } from 'ioredis';
import { baseCaller, benchSite } from './agentdb-worker.ts';
// The scheduler's nanoseconds: /proc's 10 ms ticks were ~8 a round of a child's 1,500 sequential reads.
import { childPids, cpuSecondsFine as cpuSeconds } from './cpu.ts';
import { pkRead, pkReadTable } from './pk-read.ts';
import { rawBullmq } from './raw-bullmq.ts';
import { drive, quantile, round } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SEQ = Number(process.env.BENCH_SEQ_CALLS ?? 2000);
const CONC = Number(process.env.BENCH_CONC_CALLS ?? 5000);

// A budget no run fills: at 5,000 calls a side a round, a plan's 128 MB is used up in a few rounds.
const site = benchSite(REDIS_URL, 'floor', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent', REDIS_BYTES_PER_WORKSPACE: String(2 ** 40) });
const worker = await site.worker({}, process.env.WORKER_BIN);
const raw = await rawBullmq(REDIS_URL, `${site.config.prefix}-raw`, 32, true);
const rawChild = await rawBullmq(REDIS_URL, `${site.config.prefix}-rawc`, 32, true, {
  file: './raw-child-worker.ts',
  args: [path.join(site.config.dataDir, 'raw-child.db')],
});
const admin = new Redis(REDIS_URL);
const base = await baseCaller(site);
const self = await baseCaller(site, 'CALLER_THIS');
/** Redis's CPU so far, user and system, in seconds. */
const redisCpu = async () => {
  const info = await admin.info('cpu');
  const f = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return f('used_cpu_sys') + f('used_cpu_user');
};
/** Scripts Redis ran so far (EVALSHA, and EVAL the first time). */
const redisScripts = async () => {
  const stats = await admin.info('commandstats');
  const calls = (command: string) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
  return calls('evalsha') + calls('eval');
};
try {
  const ours = await pkReadTable(site.client);
  // FLOOR_RAW=0 leaves out the raw sides (an A/B of the caller alone, in half the time).
  const rawSides =
    process.env.FLOOR_RAW === '0'
      ? {}
      : {
          raw: { call: (i: number) => raw.call(i).then(() => undefined), pid: raw.pid! },
          rawChild: { call: (i: number) => rawChild.call(i).then(() => undefined), pid: rawChild.pid! },
        };
  const sides = {
    ...rawSides,
    ours: { call: self ? pkRead(self) : ours, pid: worker.pid },
    ...(base ? { oursBase: { call: pkRead(base), pid: worker.pid } } : {}),
  };
  // Each side warmed at 64 in flight too (BENCH_WARM_CONC_CALLS, as query-only.ts): V8 compiles a
  // worker's hot paths for 20-40 s (session 31, P7).
  for (const s of Object.values(sides)) {
    await drive(1000, 1, s.call);
    await drive(1000, 16, s.call);
    await drive(Number(process.env.BENCH_WARM_CONC_CALLS ?? 10000), 64, s.call);
  }
  type Row = { p50: number; perSec: number; caller: number; worker: number; children: number; redisUs: number; redisBusy: number; scripts: number };
  const rows: Record<string, Row[]> = {};
  const measure = async (key: string, s: { call: (i: number) => Promise<void>; pid: number }, n: number, conc: number) => {
    const kids = () => childPids(s.pid).reduce((t, p) => t + cpuSeconds(p), 0);
    const c0 = process.cpuUsage();
    const w0 = cpuSeconds(s.pid);
    const k0 = kids();
    const r0 = await redisCpu();
    const e0 = await redisScripts();
    const d = await drive(n, conc, s.call);
    const c = process.cpuUsage(c0);
    const redisSeconds = (await redisCpu()) - r0;
    const scripts = ((await redisScripts()) - e0) / n;
    const sorted = [...d.latencies].sort((a, b) => a - b);
    const row = {
      p50: quantile(sorted, 0.5),
      perSec: n / d.seconds,
      caller: ((c.user + c.system) / 1e6 / n) * 1000,
      worker: ((cpuSeconds(s.pid) - w0) / n) * 1000,
      children: ((kids() - k0) / n) * 1000,
      redisUs: (redisSeconds / n) * 1e6,
      redisBusy: redisSeconds / d.seconds,
      scripts,
    };
    (rows[key] ??= []).push(row);
    // Each round's figures as they come (stderr), for an A/B's pairs.
    console.error(JSON.stringify({ key, ...Object.fromEntries(Object.entries(row).map(([f, v]) => [f, round(v, 3)])) }));
  };
  for (let r = 0; r < ROUNDS; r++) {
    // The caller's A and B take turns at going first.
    const order = Object.entries(sides);
    const at = order.findIndex(([k]) => k === 'ours');
    if (base && r % 2 === 1) order.splice(at, 2, order[at + 1]!, order[at]!);
    for (const [k, s] of order) await measure(`${k}Seq`, s, SEQ, 1);
    for (const [k, s] of order) await measure(`${k}64`, s, CONC, 64);
  }
  const med = (xs: number[]) =>
    quantile(
      [...xs].sort((a, b) => a - b),
      0.5,
    );
  const out: Record<string, Record<string, number>> = {};
  for (const [k, rs] of Object.entries(rows)) {
    out[k] = Object.fromEntries(
      (['p50', 'perSec', 'caller', 'worker', 'children', 'redisUs', 'redisBusy', 'scripts'] as const).map((f) => [f, round(med(rs.map((x) => x[f])), 3)]),
    );
  }
  console.log(
    JSON.stringify({ rounds: ROUNDS, note: 'p50 ms; CPU s per 1,000 calls; Redis µs per call, busy share of a core, scripts per call', ...out }, null, 1),
  );
} finally {
  await base?.close();
  await self?.close();
  admin.disconnect();
  await rawChild.close();
  await raw.close();
  await site.close();
}
