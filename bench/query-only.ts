// The PK-read scenario of `npm run bench` alone (`npm run build && node --import tsx bench/query-only.ts`):
// sequential and 64-in-flight DATA_QUERY_SQL by primary key against raw BullMQ, interleaved
// rounds, plus the CPU each process spends per 1,000 sequential calls, ours and raw BullMQ's (to
// say where a ratio moved). In the same rounds, a small insert with history capture on (issue 31
// part 2's goal: ≥ 0.8× raw BullMQ's sequential throughput), with its CPU per call too.
// BENCH_ROUNDS (default 3), BENCH_SEQ_CALLS (default 2000), BENCH_WARM_CONC_CALLS (default 10,000: the
// warm-up at 64 in flight, each side; 0 leaves it out, as runs before session 33 had it). WORKER_BIN: another build's
// bin/agentdb.js for the worker (an A/B of the worker and its children; the caller stays this checkout's).
// CALLER_BASE: another build's dist/src/index.js, whose client's PK reads are measured too
// (`callerBase`, the same worker), taking turns with this checkout's at going first: an A/B of the caller.
// HISTORY_CAPTURE=off in the environment (the worker inherits it): its children capture no history, so an
// on/off pair says what history costs the whole insert call, not just the child's loop.
import { writeFileSync } from 'node:fs';
import { baseCaller, benchSite } from './agentdb-worker.ts';
import { pkRead, pkReadTable } from './pk-read.ts';
// The scheduler's nanoseconds: /proc's 10 ms ticks were ~8 a round of a child's 1,500 sequential reads.
import { cpuSecondsFine as cpuSeconds, childPids } from './cpu.ts';
import { rawBullmq } from './raw-bullmq.ts';
import { smallInsert } from './small-insert.ts';
import { drive, quantile, round, summarise, type RunStats } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SEQ = Number(process.env.BENCH_SEQ_CALLS ?? 2000);
const CONC = Number(process.env.BENCH_CONC_CALLS ?? 5000);
const WARM_CONC = Number(process.env.BENCH_WARM_CONC_CALLS ?? 10000);

// A budget no run fills: at 5,000 calls a side a round, a plan's 128 MB is used up in a few rounds.
const site = benchSite(REDIS_URL, 'query', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent', REDIS_BYTES_PER_WORKSPACE: String(2 ** 40) });
const worker = await site.worker({}, process.env.WORKER_BIN);
const raw = await rawBullmq(REDIS_URL, `${site.config.prefix}-raw`, 32, true);
const base = await baseCaller(site);
// CALLER_THIS: this checkout's build for the PK reads measured, so that both sides run built code.
const self = await baseCaller(site, 'CALLER_THIS');
try {
  const made = await pkReadTable(site.client);
  const query = self ? pkRead(self) : made;
  const insert = await smallInsert(site.client);
  const baseQuery = base ? pkRead(base) : undefined;
  // Each side warmed alike, at each concurrency it is measured at: V8 still compiles a worker's
  // hot paths 20-40 s into a run (session 31, P7), and a service that runs for days is measured warm.
  for (const warm of [query, insert, (i: number) => raw.call(i), ...(baseQuery ? [baseQuery] : [])]) {
    await drive(1000, 1, warm);
    await drive(1000, 16, warm);
    if (warm !== insert) await drive(WARM_CONC, 64, warm);
  }
  const runs: Record<string, RunStats[]> = { rawSeq: [], agentSeq: [], insertSeq: [], rawConc: [], agentConc: [], baseSeq: [], baseConc: [] };
  const baseCpu: Record<string, number[]> = { bench: [], worker: [], children: [] };
  const cpu: Record<string, number[]> = { bench: [], worker: [], children: [] };
  const insertCpu: Record<string, number[]> = { bench: [], worker: [], children: [] };
  // Raw BullMQ's caller (this process) and worker over its sequential round, to set beside ours.
  const rawCpu: Record<string, number[]> = { bench: [], worker: [] };
  const procs = () => ({ bench: process.cpuUsage(), worker: cpuSeconds(worker.pid), children: childPids(worker.pid).reduce((n, p) => n + cpuSeconds(p), 0) });
  // One sequential round of `call`, its stats into runs[key] and each process's CPU into into.
  const measured = async (key: string, call: (i: number) => Promise<void>, into: Record<string, number[]>) => {
    const before = procs();
    const done = await drive(SEQ, 1, call);
    const after = procs();
    runs[key]!.push(summarise(done.latencies, done.seconds));
    const benchCpu = process.cpuUsage(before.bench);
    into.bench!.push(((benchCpu.user + benchCpu.system) / 1e6 / SEQ) * 1000);
    into.worker!.push(((after.worker - before.worker) / SEQ) * 1000);
    into.children!.push(((after.children - before.children) / SEQ) * 1000);
  };
  for (let r = 0; r < ROUNDS; r++) {
    const rawBefore = { bench: process.cpuUsage(), worker: raw.pid ? cpuSeconds(raw.pid) : 0 };
    let d = await drive(SEQ, 1, (i) => raw.call(i));
    runs.rawSeq!.push(summarise(d.latencies, d.seconds));
    const rawBench = process.cpuUsage(rawBefore.bench);
    rawCpu.bench!.push(((rawBench.user + rawBench.system) / 1e6 / SEQ) * 1000);
    rawCpu.worker!.push((((raw.pid ? cpuSeconds(raw.pid) : 0) - rawBefore.worker) / SEQ) * 1000);
    // The caller's A (CALLER_BASE) and B take turns at going first.
    const baseFirst = r % 2 === 1;
    if (baseQuery && baseFirst) await measured('baseSeq', baseQuery, baseCpu);
    await measured('agentSeq', query, cpu);
    if (baseQuery && !baseFirst) await measured('baseSeq', baseQuery, baseCpu);
    await measured('insertSeq', insert, insertCpu);
    d = await drive(CONC, 64, (i) => raw.call(i));
    runs.rawConc!.push(summarise(d.latencies, d.seconds));
    if (baseQuery && baseFirst) {
      d = await drive(CONC, 64, baseQuery);
      runs.baseConc!.push(summarise(d.latencies, d.seconds));
    }
    d = await drive(CONC, 64, query);
    runs.agentConc!.push(summarise(d.latencies, d.seconds));
    if (baseQuery && !baseFirst) {
      d = await drive(CONC, 64, baseQuery);
      runs.baseConc!.push(summarise(d.latencies, d.seconds));
    }
  }
  const med = (xs: number[]) =>
    quantile(
      [...xs].sort((a, b) => a - b),
      0.5,
    );
  const perProcess = (by: Record<string, number[]>) => Object.fromEntries(Object.entries(by).map(([k, v]) => [k, round(med(v), 3)]));
  const m = (k: string, f: keyof RunStats) => med(runs[k]!.map((s) => s[f] as number));
  const stats = (k: string): RunStats => ({
    calls: runs[k]![0]!.calls,
    seconds: m(k, 'seconds'),
    callsPerSec: m(k, 'callsPerSec'),
    p50Ms: m(k, 'p50Ms'),
    p99Ms: m(k, 'p99Ms'),
  });
  // For `npm run bench:charts` (throughput by concurrency); ignored by git, as latest.json is.
  const figures = {
    sequential: { rawBullmq: stats('rawSeq'), agentdb: stats('agentSeq') },
    inFlight64: { rawBullmq: stats('rawConc'), agentdb: stats('agentConc') },
    smallInsertSequential: { rawBullmq: stats('rawSeq'), agentdb: stats('insertSeq') },
  };
  writeFileSync(
    new URL('./results/query-only-latest.json', import.meta.url),
    `${JSON.stringify({ at: new Date().toISOString(), rounds: ROUNDS, ...figures }, null, 2)}\n`,
  );
  console.log(
    JSON.stringify({
      rounds: ROUNDS,
      rawSeqP50Ms: m('rawSeq', 'p50Ms'),
      agentSeqP50Ms: m('agentSeq', 'p50Ms'),
      ratios: {
        sequentialThroughput: round(m('agentSeq', 'callsPerSec') / m('rawSeq', 'callsPerSec')),
        sequentialP50: round(m('agentSeq', 'p50Ms') / m('rawSeq', 'p50Ms')),
        inFlight64Throughput: round(m('agentConc', 'callsPerSec') / m('rawConc', 'callsPerSec')),
        inFlight64P50: round(m('agentConc', 'p50Ms') / m('rawConc', 'p50Ms')),
      },
      cpuSecondsPer1000SequentialCalls: perProcess(cpu),
      smallInsert: {
        p50Ms: m('insertSeq', 'p50Ms'),
        ratios: {
          sequentialThroughput: round(m('insertSeq', 'callsPerSec') / m('rawSeq', 'callsPerSec')),
          sequentialP50: round(m('insertSeq', 'p50Ms') / m('rawSeq', 'p50Ms')),
        },
        goal: { sequentialThroughputAtLeast: 0.8 },
        cpuSecondsPer1000SequentialCalls: perProcess(insertCpu),
      },
      rawBullmqCpuSecondsPer1000SequentialCalls: perProcess(rawCpu),
      ...(baseQuery
        ? {
            callerBase: {
              seqCallsPerSec: round(m('baseSeq', 'callsPerSec')),
              seqP50Ms: m('baseSeq', 'p50Ms'),
              inFlight64CallsPerSec: round(m('baseConc', 'callsPerSec')),
              inFlight64P50Ms: m('baseConc', 'p50Ms'),
              cpuSecondsPer1000SequentialCalls: perProcess(baseCpu),
            },
            callerThis: {
              seqCallsPerSec: round(m('agentSeq', 'callsPerSec')),
              seqP50Ms: m('agentSeq', 'p50Ms'),
              inFlight64CallsPerSec: round(m('agentConc', 'callsPerSec')),
              inFlight64P50Ms: m('agentConc', 'p50Ms'),
            },
          }
        : {}),
    }),
  );
} finally {
  await base?.close();
  await self?.close();
  await raw.close();
  await site.close();
}
