// `npm run build && node --import tsx bench/worker-ab.ts <a/bin/agentdb.js> [b/bin/agentdb.js]`:
// the CPU a worker spends per sequential PK read, two builds side by side (issue 31). Each build
// runs its own `agentdb worker` on its own prefix; rounds of CALLS reads alternate A B B A …, so
// the machine's load falls on both alike, and the medians of the rounds are compared. B is this
// checkout's dist/ unless given. The caller is this process for both (the same client code).
// A baseline: `cp -r dist .ab-base` before a change (inside the checkout, so that its imports
// find node_modules), or another commit built outside it with a node_modules link (not a whole
// tree inside: biome takes its biome.jsonc for a second root). Sides run in both orders give
// the truest figure: under load the second side's wall time ran slower for identical builds.
// ROUNDS (default 8), CALLS (default 1000), CONC (calls in flight, default 1). KIND=insert: the
// small insert of bench/small-insert.ts (one new row per call, history on) instead of the read.
// Redis's CPU per call too (INFO cpu, µs): only meaningful on a Redis of the run's own (REDIS_URL).
// The worker's and its children's CPU are the scheduler's nanoseconds (`cpuSecondsFine`), not /proc's 10 ms ticks.
// NODE_OPTIONS_A, NODE_OPTIONS_B: Node options of one side's worker (the same build both sides: a flag's A/B).
// WARM (default 0): rounds each side runs first, alternating, and are not counted: a worker is
// still compiling its call path for its first ~40 s (session 31, P7: rounds at 64 in flight fell
// from 0.13 to 0.05 ms a call over a run), so counted rounds from a cold start mostly compare warm-ups.
import path from 'node:path';
import { Redis } from 'ioredis';
import { fileURLToPath } from 'node:url';
import { benchSite, type BenchSite } from './agentdb-worker.ts';
import { pkReadTable } from './pk-read.ts';
import { smallInsert } from './small-insert.ts';
import { childPids, cpuSecondsFine as cpuSeconds, syscalls } from './cpu.ts';
import { drive, median, quantile, round } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.ROUNDS ?? 8);
const CALLS = Number(process.env.CALLS ?? 1000);
const CONC = Number(process.env.CONC ?? 1);
const INSERT = process.env.KIND === 'insert';
const WARM = Number(process.env.WARM ?? 0);
const bins = [process.argv[2], process.argv[3] ?? fileURLToPath(new URL('../dist/bin/agentdb.js', import.meta.url))].map((b) => {
  if (!b) throw new Error('usage: worker-ab.ts <a/bin/agentdb.js> [b/bin/agentdb.js]');
  return path.resolve(b);
});

interface Side {
  name: string;
  site: BenchSite;
  pid: number;
  query(i: number): Promise<void>;
  worker: number[];
  children: number[];
  msPerCall: number[];
  redisUs: number[];
  /** Socket reads Redis did per call (INFO stats): each is a write of the caller's or the worker's that woke it. */
  redisReads: number[];
  /** Write system calls per call (/proc io syscw): the worker's, and its children's together. */
  workerWrites: number[];
  childWrites: number[];
  /** Every call's latency, ms. */
  latencies: number[];
}

const admin = new Redis(REDIS_URL);
/** Redis's CPU so far, user and system, in µs. */
const redisCpu = async () => {
  const info = await admin.info('cpu');
  const f = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return (f('used_cpu_sys') + f('used_cpu_user')) * 1e6;
};
/** Socket reads Redis did so far. */
const redisReadsSoFar = async () => Number(/^total_reads_processed:(\d+)/m.exec(await admin.info('stats'))?.[1] ?? 0);

const sides: Side[] = [];
try {
  for (const [i, bin] of bins.entries()) {
    const name = i === 0 ? 'A' : 'B';
    // A budget no run fills: rounds of thousands of calls at 64 in flight use up a plan's 128 MB.
    const site = benchSite(REDIS_URL, `ab-${name}`, { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent', REDIS_BYTES_PER_WORKSPACE: String(2 ** 40) });
    // NODE_OPTIONS_A / NODE_OPTIONS_B: the side's worker runs with these Node options (a V8 flag A/B on one build).
    const nodeOptions = process.env[`NODE_OPTIONS_${name}`];
    const { pid } = await site.worker(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}, bin);
    const query = INSERT ? await smallInsert(site.client) : await pkReadTable(site.client);
    sides.push({
      name,
      site,
      pid,
      query: async (i) => query(i),
      worker: [],
      children: [],
      msPerCall: [],
      redisUs: [],
      redisReads: [],
      workerWrites: [],
      childWrites: [],
      latencies: [],
    });
    await drive(500, 1, query);
  }
  for (let w = 0; w < WARM; w++) for (const side of w % 2 === 0 ? sides : [...sides].reverse()) await drive(CALLS, CONC, side.query);
  for (let r = 0; r < ROUNDS; r++) {
    // A B, then B A: neither build always runs first after the other's round.
    for (const side of r % 2 === 0 ? sides : [...sides].reverse()) {
      const kids = childPids(side.pid);
      const before = { worker: cpuSeconds(side.pid), children: kids.reduce((s, p) => s + cpuSeconds(p), 0) };
      const r0 = await redisCpu();
      const n0 = await redisReadsSoFar();
      const kidWrites = () => kids.reduce((t, p) => t + syscalls(p).writes, 0);
      const ww0 = syscalls(side.pid).writes;
      const cw0 = kidWrites();
      const d = await drive(CALLS, CONC, side.query);
      side.redisUs.push(((await redisCpu()) - r0) / CALLS);
      side.redisReads.push(((await redisReadsSoFar()) - n0) / CALLS);
      side.workerWrites.push((syscalls(side.pid).writes - ww0) / CALLS);
      side.childWrites.push((kidWrites() - cw0) / CALLS);
      side.worker.push(((cpuSeconds(side.pid) - before.worker) * 1000) / CALLS);
      side.children.push(((kids.reduce((s, p) => s + cpuSeconds(p), 0) - before.children) * 1000) / CALLS);
      side.msPerCall.push((d.seconds * 1000) / CALLS);
      side.latencies.push(...d.latencies);
    }
  }
  const med = (xs: number[]) => round(median(xs));
  for (const s of sides) {
    console.log(
      JSON.stringify({
        side: s.name,
        bin: path.relative(process.cwd(), bins[sides.indexOf(s)]!),
        workerMsPerCall: med(s.worker),
        childMsPerCall: med(s.children),
        msPerCall: med(s.msPerCall),
        redisUsPerCall: med(s.redisUs),
        redisReadsPerCall: med(s.redisReads),
        workerWritesPerCall: med(s.workerWrites),
        childWritesPerCall: med(s.childWrites),
        rounds: s.worker.map((w) => round(w, 4)),
        latencyMs: (() => {
          const l = [...s.latencies].sort((x, y) => x - y);
          return { p50: round(quantile(l, 0.5)), p90: round(quantile(l, 0.9)), p99: round(quantile(l, 0.99)), max: round(l.at(-1) ?? 0) };
        })(),
      }),
    );
  }
  const [a, b] = sides;
  const pairs = a!.worker.map((w, i) => b!.worker[i]! / w);
  const sum = (xs: number[]) => xs.reduce((t, x) => t + x, 0);
  // Redis's CPU a call, B over A in each pair: a script's cut shows here, not in the worker's.
  const redisPairs = a!.redisUs.map((u, i) => b!.redisUs[i]! / u);
  // The executor children's CPU a call, B over A in each pair: a cut in the child shows here.
  const childPairs = a!.children.map((c, i) => b!.children[i]! / c);
  console.log(
    JSON.stringify({
      workerBoverA: med(pairs),
      // How many of the pairs B spent less in, and more: a median alone hid 18 of 29 one way.
      workerPairsBLower: pairs.filter((p) => p < 1).length,
      workerPairsBHigher: pairs.filter((p) => p > 1).length,
      workerSumsBoverA: round(sum(b!.worker) / sum(a!.worker)),
      msBoverA: med(a!.msPerCall.map((m, i) => b!.msPerCall[i]! / m)),
      redisBoverA: med(redisPairs),
      redisPairsBLower: redisPairs.filter((p) => p < 1).length,
      redisPairsBHigher: redisPairs.filter((p) => p > 1).length,
      redisSumsBoverA: round(sum(b!.redisUs) / sum(a!.redisUs)),
      childrenBoverA: med(childPairs),
      childrenPairsBLower: childPairs.filter((p) => p < 1).length,
      childrenPairsBHigher: childPairs.filter((p) => p > 1).length,
      childrenSumsBoverA: round(sum(b!.children) / sum(a!.children)),
    }),
  );
} finally {
  admin.disconnect();
  for (const s of sides) await s.site.close();
}
