// The small insert's floor (`npm run build && node --import tsx bench/insert-floor.ts`, issue 31's
// "a small insert with history capture >= 0.8x raw BullMQ's throughput"): raw BullMQ (no-op worker),
// raw BullMQ whose worker asks a forked child to read a row (the read's floor, floor.ts's) or to
// insert one (plain better-sqlite3: one commit, WAL, synchronous = NORMAL; no exactly-once record,
// activity row or history), and agentdb's PK read and small insert (history on), sequential, in
// interleaved rounds, with each process's CPU per call. Ratios are each round's to raw BullMQ's in
// that round, their median. What the goal asks, beside what a child's plain commit alone reaches.
// BENCH_ROUNDS (default 3), BENCH_SEQ_CALLS (default 2000), WARM (calls each side runs first,
// default 1500), WORKER_BIN as query-only.ts, REDIS_URL (a Redis of the run's own).
import os from 'node:os';
import path from 'node:path';
import { benchSite } from './agentdb-worker.ts';
import { childPids, cpuSeconds } from './cpu.ts';
import { pkReadTable } from './pk-read.ts';
import { rawBullmq } from './raw-bullmq.ts';
import { smallInsert } from './small-insert.ts';
import { drive, median, quantile, round } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SEQ = Number(process.env.BENCH_SEQ_CALLS ?? 2000);

const site = benchSite(REDIS_URL, 'insfloor', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent', REDIS_BYTES_PER_WORKSPACE: String(2 ** 40) });
const worker = await site.worker({}, process.env.WORKER_BIN);
const raw = await rawBullmq(REDIS_URL, `${site.config.prefix}-raw`, 32, true);
const childOf = (mode: string[]) =>
  rawBullmq(REDIS_URL, `${site.config.prefix}-raw${mode.length ? 'i' : 'c'}`, 32, true, {
    file: './raw-child-worker.ts',
    args: [path.join(site.config.dataDir, `raw-child${mode.length ? '-insert' : ''}.db`), ...mode],
  });
const floorRead = await childOf([]);
const floorInsert = await childOf(['insert']);
try {
  const sides: Record<string, { call: (i: number) => Promise<unknown>; pid: number; children: boolean }> = {
    raw: { call: (i) => raw.call(i), pid: raw.pid!, children: false },
    floorRead: { call: (i) => floorRead.call(i), pid: floorRead.pid!, children: true },
    floorInsert: { call: (i) => floorInsert.call(i), pid: floorInsert.pid!, children: true },
    oursRead: { call: await pkReadTable(site.client), pid: worker.pid, children: true },
    oursInsert: { call: await smallInsert(site.client), pid: worker.pid, children: true },
  };
  for (const s of Object.values(sides)) await drive(Number(process.env.WARM ?? 1500), 1, s.call);
  const out: Record<string, { callsPerS: number[]; p50Ms: number[]; caller: number[]; worker: number[]; children: number[] }> = {};
  for (let r = 0; r < ROUNDS; r++) {
    const names = Object.keys(sides);
    for (const name of r % 2 ? names.reverse() : names) {
      const s = sides[name]!;
      const kids = () => (s.children ? childPids(s.pid).reduce((n, p) => n + cpuSeconds(p), 0) : 0);
      const [c0, w0, k0] = [process.cpuUsage(), cpuSeconds(s.pid), kids()];
      const d = await drive(SEQ, 1, s.call);
      const c = process.cpuUsage(c0);
      const o = (out[name] ??= { callsPerS: [], p50Ms: [], caller: [], worker: [], children: [] });
      o.callsPerS.push(Math.round(SEQ / d.seconds));
      o.p50Ms.push(
        round(
          quantile(
            [...d.latencies].sort((a, b) => a - b),
            0.5,
          ),
        ),
      );
      o.caller.push(round((c.user + c.system) / 1000 / SEQ));
      o.worker.push(round(((cpuSeconds(s.pid) - w0) * 1000) / SEQ));
      o.children.push(round(((kids() - k0) * 1000) / SEQ));
    }
  }
  // Each round's ratio to raw BullMQ's in the same round, then their median: on a loaded machine a
  // side's rate moves by half from one round to the next, and raw's with it.
  const byRound = (o: number[], r: number[]) => median(o.map((x, i) => x / r[i]!));
  const summary = Object.fromEntries(
    Object.entries(out).map(([k, o]) => [
      k,
      {
        throughputVsRaw: round(byRound(o.callsPerS, out.raw!.callsPerS)),
        p50VsRaw: round(byRound(o.p50Ms, out.raw!.p50Ms)),
        p50Ms: median(o.p50Ms),
        cpuMsPerCall: { caller: median(o.caller), worker: median(o.worker), children: median(o.children) },
      },
    ]),
  );
  console.log(JSON.stringify({ rounds: ROUNDS, seq: SEQ, load: os.loadavg().map((l) => round(l, 2)), summary, rounds_: out }, null, 1));
} finally {
  await floorInsert.close();
  await floorRead.close();
  await raw.close();
  await site.close();
}
