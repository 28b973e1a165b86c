// `npm run bench`: agentdb against raw BullMQ on the same Redis, in the same run, as ratios.
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { fileURLToPath } from 'node:url';
import { loadConfig, type Config } from '../src/config.ts';
import { guardQuery, guardWrite } from '../src/guard/guard.ts';
import { AgentDbClient } from '../src/calls/client.ts';
import { ShardWorkerPool } from '../src/shards/shard-worker-pool.ts';
import { deleteKeys } from '../test/helpers/harness.ts';
import { startProcess, stopProcess } from './process.ts';
import { benchAbandonedWaits, printAbandonedWaits } from './abandoned-waits.ts';
import { benchApprovals } from './approvals.ts';
import { benchEffect, printEffect } from './effect.ts';
import { benchAsOf, printAsOf } from './as-of.ts';
import { benchBlobUpload } from './blob-upload.ts';
import { benchMcp } from './mcp.ts';
import { benchAdapters, printAdapters } from './adapters.ts';
import { benchFairBurst, printFairBurst } from './fair-burst.ts';
import { benchWeb, printWeb } from './web.ts';
import { childPids } from './cpu.ts';
import { benchIsolation } from './isolation.ts';
import { benchScaling } from './scaling.ts';
import { benchManyDatabases, printManyDatabases } from './many-databases.ts';
import { rawBullmq } from './raw-bullmq.ts';
import { smallInsert } from './small-insert.ts';
import { benchStartup } from './startup.ts';
import { benchRedisFill, printRedisFill } from './redis-fill.ts';
import { drive, median, round, summarise, type RunStats } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const SEQ_CALLS = Number(process.env.BENCH_SEQ_CALLS ?? 2000);
const CONC_CALLS = Number(process.env.BENCH_CONC_CALLS ?? 10_000);
const IN_FLIGHT = 64;
const WARM_CONC_CALLS = Number(process.env.BENCH_WARM_CONC_CALLS ?? 10_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const DATABASES = Number(process.env.BENCH_DATABASES ?? 10_000);
/**
 * The bench's one workspace touches DATABASES databases to measure what many cost a worker: past
 * any plan's count of databases (WORKSPACE_MAX_DATABASES), pro's 1,000 among them.
 */
const QUOTA = { WORKSPACE_MAX_DATABASES: String(Math.max(DATABASES, 1000) * 2) };
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
/** The counts of databases of the many-databases scenario (BENCH_SCALE_COUNTS, comma-separated). */
const MANY_DATABASES = (process.env.BENCH_SCALE_COUNTS ?? '10,1000,10000').split(',').map(Number);
/** `process` (default): workers run as their own processes, as deployed; `inline`: in this one. */
const WORKERS = process.env.BENCH_WORKERS === 'inline' ? 'inline' : 'process';
const STARTUP_RUNS = Number(process.env.BENCH_STARTUP_RUNS ?? 30);
/**
 * `mcp`: only the `/mcp` against client library scenario (it starts its own server), for quick
 * comparisons; `abandoned-waits`: only Redis commands/s around abandoned waits (its own Redis);
 * `redis-fill`: only issue 27's hostile fills of Redis (its own redis-server); `fair-burst`: only a
 * quiet workspace's reads under a burst of fresh workspaces; `effect`: only what a parked write's
 * effect costs against the write (1, 100 and 10,000 rows changed); `as-of`: only a read of the past's
 * first and kept time against the same read of the live database; `adapters`: only a PK read
 * through each framework adapter's tool against the bare client (issue 30).
 */
const ONLY = process.env.BENCH_ONLY ?? (process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : undefined);
/** The abandoned-waits scenario: as the hostile review ran it (20,000 waits, each aborted after 150 ms). */
const ABANDONED_WAITS = {
  waits: Number(process.env.BENCH_ABANDONED_WAITS ?? 20_000),
  abortAfterMs: 150,
  inFlight: 500,
  idleSeconds: 15,
  afterSeconds: 15,
};
/** Issue 27's fill variants at its sizes, against a small budget so that the last one meets it. */
const REDIS_FILL = { budgetBytes: Number(process.env.BENCH_REDIS_BUDGET ?? 32 * 1024 * 1024), bigQueries: 300, describes: 50, parked: 40, untilRefused: 600 };
/** The built CLI, as deployed (`npm run bench` builds it first). */
const BIN = fileURLToPath(new URL('../dist/bin/agentdb.js', import.meta.url));

function medianStats(runs: RunStats[]): RunStats {
  return {
    calls: runs[0]!.calls,
    seconds: round(median(runs.map((r) => r.seconds))),
    callsPerSec: round(median(runs.map((r) => r.callsPerSec))),
    p50Ms: round(median(runs.map((r) => r.p50Ms))),
    p99Ms: round(median(runs.map((r) => r.p99Ms))),
  };
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? round(Number(m[1]) / 1024, 1) : NaN;
}

function guardCostUs(): number {
  const corpus: [typeof guardQuery, string][] = [
    [guardQuery, 'SELECT * FROM leads WHERE id = ?'],
    [guardQuery, "SELECT email, stage FROM leads WHERE stage = 'emailed' AND last_touch < date('now', '-4 days') ORDER BY id LIMIT 50"],
    [guardQuery, 'WITH recent AS (SELECT * FROM events WHERE at > ?) SELECT kind, count(*) FROM recent GROUP BY kind'],
    [guardQuery, 'SELECT a.id, b.name FROM a JOIN b ON a.b_id = b.id WHERE a.x IN (SELECT x FROM c) /* note */'],
    [guardWrite, 'INSERT OR IGNORE INTO leads (email, stage) VALUES (?, ?)'],
    [guardWrite, 'UPDATE leads SET stage = ? WHERE id = ? RETURNING id'],
    [guardWrite, 'CREATE TABLE IF NOT EXISTS leads (id INTEGER PRIMARY KEY, email TEXT UNIQUE, stage TEXT, last_touch TEXT)'],
    [guardWrite, "INSERT INTO notes (body) VALUES ('drop table t; -- not a statement')"],
  ];
  const perStatement = corpus.map(([fn, sql]) => {
    for (let i = 0; i < 500; i++) fn(sql);
    const n = 5000;
    const t = performance.now();
    for (let i = 0; i < n; i++) fn(sql);
    return ((performance.now() - t) * 1000) / n;
  });
  return round(median(perStatement), 2);
}

/** One scenario alone: the scenario and its line; no results file (it is not a full run). */
async function only(name: string) {
  if (name === 'abandoned-waits') {
    const waits = await benchAbandonedWaits(ABANDONED_WAITS);
    console.log(JSON.stringify(waits));
    printAbandonedWaits(waits);
    return;
  }
  if (name === 'redis-fill') {
    const fill = await benchRedisFill(REDIS_FILL);
    console.log(JSON.stringify(fill));
    printRedisFill(fill);
    return;
  }
  if (name === 'fair-burst') return onlyFairBurst();
  if (name === 'effect') {
    const costs = benchEffect();
    console.log(JSON.stringify(costs));
    printEffect(costs);
    return;
  }
  if (name === 'as-of') {
    const costs = await benchAsOf();
    console.log(JSON.stringify(costs));
    printAsOf(costs);
    return;
  }
  if (name === 'adapters') return onlyAdapters();
  if (name !== 'mcp')
    throw new Error(`bench: no scenario ${JSON.stringify(name)} to run alone (known: mcp, abandoned-waits, redis-fill, fair-burst, effect, as-of, adapters)`);
  const prefix = `bench-${randomUUID().slice(0, 8)}`;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-'));
  const config = loadConfig({ REDIS_URL, AGENTDB_PREFIX: prefix, AGENTDB_DATA_DIR: dataDir, LOG_LEVEL: 'silent', WORKER_CONCURRENCY: String(CONCURRENCY) });
  // No workers here: the scenario starts `agentdb start`, whose workers take its calls.
  try {
    const mcp = await benchMcp(config, { calls: SEQ_CALLS, rounds: ROUNDS });
    console.log(JSON.stringify(mcp));
    for (const m of Object.values(mcp.layouts))
      console.log(
        `PK read via /mcp (${m!.layout}): p50 ${m!.mcpP50Ms} ms vs client library ${m!.clientLibraryP50Ms} ms (ratio ${m!.p50Ratio}; goal <= 1.5); /v1/calls p50 ${m!.v1CallsP50Ms} ms (/mcp ÷ /v1 ${m!.v1Ratio}; goal <= 1.1; from node:http ${m!.v1HttpP50Ms} ms); /mcp from a bare fetch p50 ${m!.mcpFetchP50Ms} ms; ${m!.httpConnections} HTTP connection(s); per round (median of ${m!.rounds}): ÷ library ${m!.pairedRatio.library}, ÷ /v1 ${m!.pairedRatio.v1}`,
      );
  } finally {
    await deleteKeys(prefix);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** `--only adapters`: a PK read through each framework adapter's tool against the bare client, one worker process serving both. */
async function onlyAdapters() {
  const prefix = `bench-${randomUUID().slice(0, 8)}`;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-'));
  const env = { REDIS_URL, AGENTDB_PREFIX: prefix, AGENTDB_DATA_DIR: dataDir, LOG_LEVEL: 'info', WORKER_CONCURRENCY: String(CONCURRENCY), RATE_LIMITS: 'off' };
  const config = loadConfig(env);
  const { child } = await startProcess(process.execPath, [BIN, 'worker'], env, /"msg":"worker ready"/);
  try {
    const adapters = await benchAdapters(config, { calls: SEQ_CALLS, rounds: ROUNDS });
    console.log(JSON.stringify(adapters));
    printAdapters(adapters);
  } finally {
    await stopProcess(child);
    await deleteKeys(prefix);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** `--only fair-burst`: a quiet workspace's reads under waves of fresh workspaces' runaways (issue 27). */
async function onlyFairBurst() {
  const result = await benchFairBurst(REDIS_URL, fairBurstOptions());
  console.log(JSON.stringify(result));
  printFairBurst(result);
}

/** The fair-burst scenario's sizes, from BENCH_FAIR_* variables (the pool of 2 and a lane of 1, a 2 s deadline, waves of 20, 20 warmed). */
function fairBurstOptions() {
  return {
    poolSize: Number(process.env.BENCH_FAIR_POOL ?? 2),
    overflow: Number(process.env.BENCH_FAIR_OVERFLOW ?? 1),
    ...(process.env.BENCH_FAIR_LONG_MS ? { longMs: Number(process.env.BENCH_FAIR_LONG_MS) } : {}),
    statementTimeoutMs: Number(process.env.BENCH_FAIR_TIMEOUT_MS ?? 2000),
    burst: Number(process.env.BENCH_FAIR_BURST ?? 20),
    waves: Number(process.env.BENCH_FAIR_WAVES ?? 2),
    warmed: Number(process.env.BENCH_FAIR_WARMED ?? 20),
    steadySeconds: Number(process.env.BENCH_FAIR_STEADY_S ?? 10),
  };
}

/** A phase's figures on stderr as soon as it ends: a full run takes long, and one cut short still says what it measured. */
function progress(phase: string, figures: unknown): void {
  process.stderr.write(`[bench ${new Date().toISOString()}] ${phase}: ${JSON.stringify(figures)}\n`);
}

async function main() {
  // First, while nothing of the benchmark runs yet in the background.
  const startup = await benchStartup(BIN, STARTUP_RUNS);
  const prefix = `bench-${randomUUID().slice(0, 8)}`;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-'));
  const config = loadConfig({
    REDIS_URL,
    AGENTDB_PREFIX: prefix,
    AGENTDB_DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    WORKER_CONCURRENCY: String(CONCURRENCY),
    ...QUOTA,
  });
  const workers = await startWorkers(config, dataDir, prefix);
  const client = new AgentDbClient({ redisUrl: REDIS_URL, prefix, shardCount: config.shardCount, rateLimits: false });
  const raw = await rawBullmq(REDIS_URL, `${prefix}-raw`, CONCURRENCY, WORKERS === 'process');
  // A reference, not a goal: raw BullMQ plus only the executor rule (a child process answers the
  // same query). The gap between it and raw BullMQ is the child's round trip alone.
  const rawChild = await rawBullmq(REDIS_URL, `${prefix}-raw-child`, CONCURRENCY, true, {
    file: './raw-child-worker.ts',
    args: [path.join(dataDir, 'raw-child.db')],
  });

  const who = { workspace: 'bench', agent: 'reader', settings: { database: 'agent' as const } };
  const must = async (p: Promise<unknown>) => {
    const env = (await p) as { ok: boolean; error?: unknown };
    if (!env.ok) throw new Error(`bench call failed: ${JSON.stringify(env)}`);
  };
  await must(client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)' } }));
  await must(
    client.call({
      ...who,
      tool: 'DATA_WRITE_SQL',
      arguments: {
        sql: "INSERT INTO kv SELECT value, 'value-' || value FROM json_each(?)",
        params: [JSON.stringify(Array.from({ length: 1000 }, (_, i) => i))],
      },
    }),
  );
  const query = (i: number) => must(client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] } }));
  // Issue 31 part 2: a small insert (one new row), history capture on, against the same raw rounds.
  const insert = await smallInsert(client);

  // Warm every path (JIT in each process, connections, statement caches) before measuring, one
  // call at a time as well as many: a short warm-up left the first round compiling code, which
  // cost agentdb (three processes of code to compile: client, worker, executor) the most.
  // And at the in-flight count measured, each side alike (BENCH_WARM_CONC_CALLS, default 10,000; 0 as
  // before session 33): V8 still compiles a worker's hot paths 20-40 s into a run (session 31, P7).
  for (const warm of [query, insert, (i: number) => raw.call(i), (i: number) => rawChild.call(i)]) {
    await drive(1000, 1, warm);
    await drive(1000, 16, warm);
    if (warm !== insert) await drive(WARM_CONC_CALLS, IN_FLIGHT, warm);
  }

  const runs = {
    rawSeq: [] as RunStats[],
    agentSeq: [] as RunStats[],
    insertSeq: [] as RunStats[],
    childSeq: [] as RunStats[],
    rawConc: [] as RunStats[],
    agentConc: [] as RunStats[],
    childConc: [] as RunStats[],
  };
  for (let r = 0; r < ROUNDS; r++) {
    // Interleaved rounds, so that noise from this shared machine hits every side alike.
    let d = await drive(SEQ_CALLS, 1, (i) => raw.call(i));
    runs.rawSeq.push(summarise(d.latencies, d.seconds));
    d = await drive(SEQ_CALLS, 1, query);
    runs.agentSeq.push(summarise(d.latencies, d.seconds));
    d = await drive(SEQ_CALLS, 1, insert);
    runs.insertSeq.push(summarise(d.latencies, d.seconds));
    d = await drive(SEQ_CALLS, 1, (i) => rawChild.call(i));
    runs.childSeq.push(summarise(d.latencies, d.seconds));
    d = await drive(CONC_CALLS, IN_FLIGHT, (i) => raw.call(i));
    runs.rawConc.push(summarise(d.latencies, d.seconds));
    d = await drive(CONC_CALLS, IN_FLIGHT, query);
    runs.agentConc.push(summarise(d.latencies, d.seconds));
    d = await drive(CONC_CALLS, IN_FLIGHT, (i) => rawChild.call(i));
    runs.childConc.push(summarise(d.latencies, d.seconds));
  }
  const rawSeq = medianStats(runs.rawSeq);
  const agentSeq = medianStats(runs.agentSeq);
  const childSeq = medianStats(runs.childSeq);
  const insertSeq = medianStats(runs.insertSeq);
  const rawConc = medianStats(runs.rawConc);
  const agentConc = medianStats(runs.agentConc);
  const childConc = medianStats(runs.childConc);
  progress('query', {
    sequentialThroughput: round(agentSeq.callsPerSec / rawSeq.callsPerSec),
    sequentialP50: round(agentSeq.p50Ms / rawSeq.p50Ms),
    inFlight64Throughput: round(agentConc.callsPerSec / rawConc.callsPerSec),
    inFlight64P50: round(agentConc.p50Ms / rawConc.p50Ms),
    smallInsertSequentialThroughput: round(insertSeq.callsPerSec / rawSeq.callsPerSec),
  });

  const guardUs = guardCostUs();

  const approvals = await benchApprovals(client, REDIS_URL, prefix, {
    decisions: Number(process.env.BENCH_DECISIONS ?? 300),
    parked: Number(process.env.BENCH_PARKED ?? 10_000),
    queryCalls: SEQ_CALLS,
    query,
  });

  const mcp = await benchMcp(config, { calls: SEQ_CALLS, rounds: ROUNDS });

  progress('approvals and mcp', { decisionToResultP50Ms: approvals.decisionToResult.p50Ms, mcpP50Ratio: mcp.p50Ratio }); // The web page's grid and CSV export, on a 1,000,000-row table of its own.
  const web = await benchWeb(REDIS_URL);
  // A parked write's effect against the write itself (issue 29), on the database's own connection.
  const effect = benchEffect();
  // A read of the past, first and kept, against the same read of the live database (issue 29).
  const asOf = await benchAsOf();

  // Touch many databases through the queue, then read the worker's and executor's memory.
  const touched = await drive(DATABASES, IN_FLIGHT, (i) =>
    must(
      client.call({
        workspace: 'bench',
        agent: `db-${i}`,
        settings: { database: 'agent' },
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: 'CREATE TABLE IF NOT EXISTS t (x)' },
      }),
    ),
  );
  const memory = {
    databases: DATABASES,
    seconds: round(touched.seconds),
    workerRssMb: rssMb(workers.pid),
    executorRssMb: workers.executorPids().map(rssMb),
    poolSize: config.executorPoolSize,
    handleCacheSizePerChild: config.handleCacheSize,
    totalRssMb: 0,
  };
  memory.totalRssMb = round(memory.workerRssMb + memory.executorRssMb.reduce((a, b) => a + b, 0), 1);
  progress('memory', memory);

  // Each starts worker processes of its own; the one above idles meanwhile.
  // Short phases, many rounds: a p99 of one phase moves with whatever else this shared
  // machine does in it, and the median of five is steadier than one long phase.
  const isolation = await benchIsolation(REDIS_URL, { rounds: ROUNDS, phaseSeconds: 4 });
  progress('isolation', { noisyNeighbour: isolation.noisyNeighbour.ratios, hostile: isolation.hostile.ratios, noWorker: isolation.hostile.readersNoWorker });
  const fairBurst = await benchFairBurst(REDIS_URL, fairBurstOptions());
  progress('fair burst', { fresh: fairBurst.fresh.inTimeouts, warmed: fairBurst.warmed.inTimeouts, laneRuns: fairBurst.laneRuns });
  const scaling = await benchScaling(REDIS_URL, { rounds: ROUNDS, calls: 2000 });
  progress('scaling', { heavy: scaling.heavy.ratio, light: scaling.light.ratio });
  const blobUpload = await benchBlobUpload({ mb: Number(process.env.BENCH_BLOB_MB ?? 256), rounds: ROUNDS });
  const abandonedWaits = await benchAbandonedWaits(ABANDONED_WAITS);
  progress('abandoned waits', abandonedWaits);

  // Flat as it grows (issue 31): PK read, memory, start-up and backup at 10 to 10,000 databases;
  // 100,000 is `npm run bench:scale`'s.
  const manyDatabases = await benchManyDatabases(REDIS_URL, MANY_DATABASES, { reads: SEQ_CALLS, log: (m) => progress('many databases', m) });
  const redisFill = await benchRedisFill(REDIS_FILL);
  progress('redis fill', { usedMemoryGrowthMb: redisFill.usedMemoryGrowthMb, budgetMb: redisFill.budgetMb });
  const results = {
    at: new Date().toISOString(),
    machine: { cpus: os.cpus().length, node: process.version },
    startup,
    rounds: ROUNDS,
    workers: WORKERS,
    workerConcurrency: CONCURRENCY,
    redisFill,
    query: {
      sequential: { rawBullmq: rawSeq, agentdb: agentSeq },
      inFlight64: { rawBullmq: rawConc, agentdb: agentConc },
      ratios: {
        sequentialThroughput: round(agentSeq.callsPerSec / rawSeq.callsPerSec),
        sequentialP50: round(agentSeq.p50Ms / rawSeq.p50Ms),
        inFlight64Throughput: round(agentConc.callsPerSec / rawConc.callsPerSec),
        inFlight64P50: round(agentConc.p50Ms / rawConc.p50Ms),
      },
      goals: { throughputAtLeast: 0.7, p50AtMost: 1.5 },
      smallInsert: {
        about: 'one new row per call (INSERT INTO log (v) VALUES (?), an INTEGER PRIMARY KEY), history capture on, sequential',
        sequential: insertSeq,
        ratios: {
          sequentialThroughput: round(insertSeq.callsPerSec / rawSeq.callsPerSec),
          sequentialP50: round(insertSeq.p50Ms / rawSeq.p50Ms),
        },
        goals: { throughputAtLeast: 0.8 },
      },
      reference: {
        about: 'raw BullMQ whose processor asks a child process for the row (the executor rule of DESIGN.md, nothing else of agentdb)',
        sequential: childSeq,
        inFlight64: childConc,
        ratios: {
          sequentialThroughput: round(childSeq.callsPerSec / rawSeq.callsPerSec),
          sequentialP50: round(childSeq.p50Ms / rawSeq.p50Ms),
          inFlight64Throughput: round(childConc.callsPerSec / rawConc.callsPerSec),
          inFlight64P50: round(childConc.p50Ms / rawConc.p50Ms),
        },
      },
    },
    guardMedianUs: guardUs,
    approvals: {
      ...approvals,
      ratios: {
        decisionToResultP50VsRawRoundTrip: round(approvals.decisionToResult.p50Ms / rawSeq.p50Ms),
        queryP50WithParkedVsWithout: round(approvals.queryWithParked.p50Ms / approvals.queryWithout.p50Ms),
      },
    },
    mcp,
    web,
    effect,
    asOf,
    memory,
    isolation,
    fairBurst,
    scaling,
    manyDatabases,
    blobUpload,
    abandonedWaits,
  };

  const row = (name: string, s: RunStats) =>
    `${name.padEnd(28)} ${String(s.callsPerSec).padStart(10)} ${String(s.p50Ms).padStart(9)} ${String(s.p99Ms).padStart(9)}`;
  console.log(`\nDATA_QUERY_SQL by primary key vs raw BullMQ (median of ${ROUNDS} interleaved rounds; workers: ${WORKERS}, concurrency ${CONCURRENCY})`);
  console.log(`${'run'.padEnd(28)} ${'calls/s'.padStart(10)} ${'p50 ms'.padStart(9)} ${'p99 ms'.padStart(9)}`);
  console.log(row('raw BullMQ, sequential', rawSeq));
  console.log(row('agentdb, sequential', agentSeq));
  console.log(row('agentdb insert, sequential', insertSeq));
  console.log(row('raw BullMQ, 64 in flight', rawConc));
  console.log(row('agentdb, 64 in flight', agentConc));
  console.log(row('  reference: + child, seq.', childSeq));
  console.log(row('  reference: + child, 64', childConc));
  console.log(`ratios: ${JSON.stringify(results.query.ratios)} (goal: throughput >= 0.7, p50 <= 1.5)`);
  console.log(`reference ratios (raw BullMQ + a child round trip, no goal): ${JSON.stringify(results.query.reference.ratios)}`);
  console.log(`small insert, history on: ${JSON.stringify(results.query.smallInsert.ratios)} (goal: sequential throughput >= 0.8)`);
  console.log(`guard: median ${guardUs} µs per statement`);
  console.log(
    `approvals: decision → result p50 ${approvals.decisionToResult.p50Ms} ms, p99 ${approvals.decisionToResult.p99Ms} ms (raw BullMQ round trip p50 ${rawSeq.p50Ms} ms)`,
  );
  console.log(
    `with ${approvals.parked.calls} parked calls: query p50 ${approvals.queryWithParked.p50Ms} ms, p99 ${approvals.queryWithParked.p99Ms} ms; without: p50 ${approvals.queryWithout.p50Ms} ms, p99 ${approvals.queryWithout.p99Ms} ms`,
  );
  // Each layout's (one process; HTTP apart from the workers), measured in the same rounds.
  for (const m of Object.values(mcp.layouts))
    console.log(
      `PK read via /mcp (${m!.layout}): p50 ${m!.mcpP50Ms} ms vs client library ${m!.clientLibraryP50Ms} ms (ratio ${m!.p50Ratio}, per round ${m!.pairedRatio.library}; goal <= 1.5); /v1/calls p50 ${m!.v1CallsP50Ms} ms (/mcp ÷ /v1 ${m!.v1Ratio}, per round ${m!.pairedRatio.v1}; goal <= 1.1)`,
    );
  printWeb(web);
  printEffect(effect);
  printAsOf(asOf);
  printRedisFill(redisFill);
  console.log(
    `memory after ${DATABASES} databases: ${memory.totalRssMb} MB in all (worker ${memory.workerRssMb} MB, ${memory.executorRssMb.length} executor children (pool of ${memory.poolSize} and the spare) ${memory.executorRssMb.join(' + ')} MB)`,
  );
  const nn = isolation.noisyNeighbour;
  console.log(`noisy neighbour (~${nn.slowStatementMs} ms statements): read p50 ×${nn.ratios.p50}, p99 ×${nn.ratios.p99} (goal p99 <= 1.5)`);
  const h = isolation.hostile;
  console.log(`hostile agent (32 runaway in flight): read p50 ×${h.ratios.p50}, p99 ×${h.ratios.p99}, NO_WORKER ${h.readersNoWorker} (goal p99 <= 3, none)`);
  printFairBurst(fairBurst);
  for (const [name, run] of [
    ['heavy', scaling.heavy],
    ['light', scaling.light],
  ] as const) {
    console.log(
      `scaling, ${name} aggregate (${run.sql}): ${run.oneChild.callsPerSec} calls/s with one child, ${run.defaultPool.callsPerSec} with ${scaling.poolSize}: ×${run.ratio} (goal >= 1.3)`,
    );
    console.log(`  CPU s per 1000 calls with the pool: ${JSON.stringify(run.cpuSecondsPer1000Calls.defaultPool)}`);
  }
  printManyDatabases(manyDatabases);
  printAbandonedWaits(abandonedWaits);
  console.log(
    `start-up: agentdb tools --json ${startup.toolsJsonMs} ms, node -e 0 ${startup.nodeMs} ms: ratio ${startup.ratio} (goal <= ${startup.goal.ratioAtMost}; median of ${startup.runs})`,
  );

  const dir = new URL('./results/', import.meta.url);
  mkdirSync(dir, { recursive: true });
  const json = `${JSON.stringify(results, null, 2)}\n`;
  writeFileSync(new URL(`bench-${results.at.replace(/[:.]/g, '-')}.json`, dir), json);
  writeFileSync(new URL('latest.json', dir), json);

  await raw.close();
  await rawChild.close();
  await client.close();
  await workers.stop();
  await deleteKeys(prefix);
  rmSync(dataDir, { recursive: true, force: true });
}

/** The agentdb worker under test: `agentdb worker` as a process of its own, or a pool in this one. */
async function startWorkers(config: Config, dataDir: string, prefix: string) {
  if (WORKERS === 'inline') {
    const pool = new ShardWorkerPool({ config, shards: Array.from({ length: config.shardCount }, (_, i) => i), logger: pino({ level: 'silent' }) });
    await pool.start();
    return { pid: process.pid, executorPids: () => pool.executorPids, stop: () => pool.stop() };
  }
  const env = { REDIS_URL, AGENTDB_PREFIX: prefix, AGENTDB_DATA_DIR: dataDir, LOG_LEVEL: 'info', WORKER_CONCURRENCY: String(CONCURRENCY), ...QUOTA };
  const { child } = await startProcess(process.execPath, [BIN, 'worker'], env, /"msg":"worker ready"/);
  return {
    pid: child.pid!,
    executorPids: () => childPids(child.pid!),
    stop: () => stopProcess(child),
  };
}

await (ONLY ? only(ONLY) : main());
