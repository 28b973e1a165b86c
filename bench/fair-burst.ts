// Fair executor under a burst (issue 27): a quiet workspace's reads while waves of fresh
// workspaces, then warmed-up ones, each start one runaway statement, against the same reads with
// nothing else running.
import { randomUUID } from 'node:crypto';
import type { Envelope } from '../src/contracts/envelope.ts';
import { benchSite } from './agentdb-worker.ts';
import { round, summarise, type RunStats } from './stats.ts';
import { freePort } from '../test/helpers/own-redis.ts';

const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';
const settings = { database: 'agent' as const };

/** What the scenario is run with; `npm run bench -- --only fair-burst` takes these from BENCH_FAIR_* variables. */
export interface FairBurstOptions {
  /** Executor children (EXECUTOR_POOL_SIZE): the issue's figure was taken with 2. */
  poolSize: number;
  /** EXECUTOR_OVERFLOW: the overflow lane's children (0: none, as before the lane). */
  overflow: number;
  /** EXECUTOR_LONG_MS: how long every pooled child's statement runs before the lane opens; absent: the worker's default. */
  longMs?: number;
  /** STATEMENT_TIMEOUT_MS: how long each runaway holds a child. */
  statementTimeoutMs: number;
  /** Fresh workspaces per wave, each starting one runaway. */
  burst: number;
  /** Waves, one after another, each of workspaces never seen before. */
  waves: number;
  /** Warmed-up workspaces (cheap reads first) in the warmed burst, each then starting one runaway. */
  warmed: number;
  /** Seconds of quiet reads with nothing else running. */
  steadySeconds: number;
}

/** The quiet reads' figures under one burst: in ms, in statement timeouts, and against steady state. */
interface BurstFigures extends RunStats {
  maxMs: number;
  inTimeouts: { p50: number; p99: number };
  ratios: { p50: number; p99: number };
  runawayOutcomes: Record<string, number>;
}

/**
 * Reads by primary key from one quiet workspace, one at a time (a workspace the executor has
 * served before), first with nothing else running, then under two bursts: `waves` waves of
 * `burst` fresh workspaces each starting one runaway (killed at the deadline), and `warmed`
 * workspaces that first ran cheap reads as the quiet one did, then each start one runaway. Either
 * way every pooled child is busy with a runaway for the whole burst. One `agentdb worker` process.
 */
export async function benchFairBurst(redisUrl: string, opts: FairBurstOptions) {
  const site = benchSite(redisUrl, 'fair-burst', { SHARD_COUNT: '1' });
  const { client } = site;
  const metricsPort = await freePort();
  const metricsToken = randomUUID();
  const worker = await site.worker({
    EXECUTOR_POOL_SIZE: String(opts.poolSize),
    EXECUTOR_OVERFLOW: String(opts.overflow),
    STATEMENT_TIMEOUT_MS: String(opts.statementTimeoutMs),
    ...(opts.longMs ? { EXECUTOR_LONG_MS: String(opts.longMs) } : {}),
    WORKER_METRICS_PORT: String(metricsPort),
    METRICS_TOKEN: metricsToken,
  });
  try {
    const quiet = { workspace: 'quiet', agent: 'reader', settings };
    const must = (env: Envelope) => {
      if (!env.ok) throw new Error(`fair-burst bench: ${JSON.stringify(env)}`);
      return env;
    };
    must((await client.call({ ...quiet, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)' } })) as Envelope);
    const ids = JSON.stringify(Array.from({ length: 1000 }, (_, i) => i));
    must(
      (await client.call({
        ...quiet,
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: "INSERT INTO kv SELECT value, 'v-' || value FROM json_each(?)", params: [ids] },
      })) as Envelope,
    );
    let n = 0;
    const readOnce = async (): Promise<number> => {
      const t = performance.now();
      must((await client.call({ ...quiet, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [n++ % 1000] } })) as Envelope);
      return performance.now() - t;
    };
    /** Reads one after another until `done` says stop; their latencies. */
    const readWhile = async (going: () => boolean): Promise<number[]> => {
      const latencies: number[] = [];
      while (going()) latencies.push(await readOnce());
      return latencies;
    };

    for (let i = 0; i < 50; i++) await readOnce();
    const steadyStart = performance.now();
    const steadyUntil = steadyStart + opts.steadySeconds * 1000;
    const steadyLat = await readWhile(() => performance.now() < steadyUntil);
    const steady = summarise(steadyLat, (performance.now() - steadyStart) / 1000);

    /** The quiet reads while `burst` runs, against steady state. */
    const under = async (burst: (outcomes: Record<string, number>) => Promise<void>): Promise<BurstFigures> => {
      const outcomes: Record<string, number> = {};
      let bursting = true;
      const start = performance.now();
      const reads = readWhile(() => bursting);
      await burst(outcomes);
      bursting = false;
      const lat = await reads;
      const stats = summarise(lat, (performance.now() - start) / 1000);
      return {
        ...stats,
        maxMs: round(Math.max(...lat)),
        inTimeouts: { p50: round(stats.p50Ms / opts.statementTimeoutMs), p99: round(stats.p99Ms / opts.statementTimeoutMs) },
        ratios: { p50: round(stats.p50Ms / steady.p50Ms), p99: round(stats.p99Ms / steady.p99Ms) },
        runawayOutcomes: outcomes,
      };
    };
    const runaway = async (workspace: string, outcomes: Record<string, number>) => {
      const env = (await client.call({ workspace, agent: 'a', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: FOREVER } })) as Envelope;
      const code = env.ok ? 'ok' : env.error.code;
      outcomes[code] = (outcomes[code] ?? 0) + 1;
    };

    const fresh = await under(async (outcomes) => {
      for (let w = 0; w < opts.waves; w++) await Promise.all(Array.from({ length: opts.burst }, (_, i) => runaway(`fresh-${w}-${i}`, outcomes)));
    });
    // Warmed before the reads start: each as cheap by its record as the quiet workspace.
    const warmedNames = Array.from({ length: opts.warmed }, (_, i) => `warm-${i}`);
    for (const workspace of warmedNames) {
      must((await client.call({ workspace, agent: 'a', settings, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v)' } })) as Envelope);
      for (let i = 0; i < 3; i++)
        must((await client.call({ workspace, agent: 'a', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } })) as Envelope);
    }
    const warmed = await under(async (outcomes) => {
      await Promise.all(warmedNames.map((ws) => runaway(ws, outcomes)));
    });
    const lane = await laneRuns(metricsPort, metricsToken);
    return {
      about: `one quiet workspace reads by primary key, one at a time; pool of ${opts.poolSize}, EXECUTOR_OVERFLOW ${opts.overflow}${opts.longMs ? `, EXECUTOR_LONG_MS ${opts.longMs}` : ''}, STATEMENT_TIMEOUT_MS ${opts.statementTimeoutMs}; fresh: ${opts.waves} wave(s) of ${opts.burst} fresh workspaces, warmed: ${opts.warmed} workspaces that read first, each starting one runaway`,
      steady,
      fresh,
      warmed,
      laneRuns: lane,
      goal: { p99RatioAtMost: 1.5, p99AtMostMs: opts.statementTimeoutMs },
    };
  } finally {
    // SIGKILL: a graceful stop would wait for the runaway statements still in hand.
    await worker.stop('SIGKILL');
    await site.close();
  }
}

/** The worker's overflow-lane counter, by `ran`, from its own metrics port. */
async function laneRuns(port: number, token: string): Promise<Record<string, number>> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${token}` } });
  if (!res.ok) throw new Error(`fair-burst bench: the worker's /metrics answered ${res.status}`);
  const text = await res.text();
  const runs: Record<string, number> = {};
  for (const m of text.matchAll(/^agentdb_executor_overflow_runs_total\{ran="(\w+)"\} (\d+)$/gm)) runs[m[1]!] = Number(m[2]);
  return runs;
}

/** The scenario's figures in a line per burst. */
export function printFairBurst(r: Awaited<ReturnType<typeof benchFairBurst>>): void {
  console.log(
    `fair burst (${r.about}): quiet read p50 / p99 ${r.steady.p50Ms} / ${r.steady.p99Ms} ms steady; overflow lane runs ${JSON.stringify(r.laneRuns)}`,
  );
  for (const [name, b] of [
    ['fresh', r.fresh],
    ['warmed', r.warmed],
  ] as const) {
    console.log(
      `  under the ${name} burst: ${b.calls} reads, p50 / p99 ${b.p50Ms} / ${b.p99Ms} ms (${b.inTimeouts.p50} / ${b.inTimeouts.p99} of a statement timeout; ×${b.ratios.p50} / ×${b.ratios.p99} steady), max ${b.maxMs} ms (goal p99 <= 1.5× steady, <= one statement timeout)`,
    );
  }
}
