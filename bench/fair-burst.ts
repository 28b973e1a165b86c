// Fair executor under a burst (issue 27): a quiet workspace's reads while waves of fresh
// workspaces each start one runaway statement, against the same reads with nothing else running.
import type { Envelope } from '../src/contracts/envelope.ts';
import { benchSite } from './agentdb-worker.ts';
import { round, summarise, type RunStats } from './stats.ts';

const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';
const settings = { database: 'agent' as const };

/** What the scenario is run with; `npm run bench -- --only fair-burst` takes these from BENCH_FAIR_* variables. */
export interface FairBurstOptions {
  /** Executor children (EXECUTOR_POOL_SIZE): the figure was taken with 2. */
  poolSize: number;
  /** STATEMENT_TIMEOUT_MS: how long each runaway holds a child. */
  statementTimeoutMs: number;
  /** Fresh workspaces per wave, each starting one runaway. */
  burst: number;
  /** Waves, one after another, each of workspaces never seen before. */
  waves: number;
  /** Seconds of quiet reads with nothing else running. */
  steadySeconds: number;
}

/**
 * Reads by primary key from one quiet workspace, one at a time (a workspace the executor has
 * served before), first with nothing else running, then while `waves` waves of `burst` fresh
 * workspaces each start one runaway (killed at the deadline): every child is busy with a
 * runaway for the whole burst, and each wave's workspaces are new, so no history of theirs
 * holds them back. One `agentdb worker` process.
 */
export async function benchFairBurst(redisUrl: string, opts: FairBurstOptions) {
  const site = benchSite(redisUrl, 'fair-burst', { SHARD_COUNT: '1' });
  const { client } = site;
  const worker = await site.worker({ EXECUTOR_POOL_SIZE: String(opts.poolSize), STATEMENT_TIMEOUT_MS: String(opts.statementTimeoutMs) });
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

    const outcomes: Record<string, number> = {};
    let bursting = true;
    const burstStart = performance.now();
    const reads = readWhile(() => bursting);
    for (let w = 0; w < opts.waves; w++) {
      const wave = Array.from({ length: opts.burst }, async (_, i) => {
        const env = (await client.call({
          workspace: `fresh-${w}-${i}`,
          agent: 'a',
          settings,
          tool: 'DATA_QUERY_SQL',
          arguments: { sql: FOREVER },
        })) as Envelope;
        const code = env.ok ? 'ok' : env.error.code;
        outcomes[code] = (outcomes[code] ?? 0) + 1;
      });
      await Promise.all(wave);
    }
    bursting = false;
    const burstLat = await reads;
    const underBurst: RunStats & { maxMs: number } = {
      ...summarise(burstLat, (performance.now() - burstStart) / 1000),
      maxMs: round(Math.max(...burstLat)),
    };
    return {
      about: `one quiet workspace reads by primary key, one at a time; pool of ${opts.poolSize}, STATEMENT_TIMEOUT_MS ${opts.statementTimeoutMs}; ${opts.waves} wave(s) of ${opts.burst} fresh workspaces each starting one runaway`,
      steady,
      underBurst,
      runawayOutcomes: outcomes,
      ratios: { p50: round(underBurst.p50Ms / steady.p50Ms), p99: round(underBurst.p99Ms / steady.p99Ms) },
      p99OverTimeout: round(underBurst.p99Ms / opts.statementTimeoutMs),
      goal: { p99RatioAtMost: 1.5, p99AtMostMs: opts.statementTimeoutMs },
    };
  } finally {
    // SIGKILL: a graceful stop would wait for the runaway statements still in hand.
    await worker.stop('SIGKILL');
    await site.close();
  }
}

/** The scenario's figures in a line. */
export function printFairBurst(r: Awaited<ReturnType<typeof benchFairBurst>>): void {
  console.log(
    `fair burst (${r.about}): quiet read p99 ${r.steady.p99Ms} ms steady, ${r.underBurst.p99Ms} ms under the burst (×${r.ratios.p99}; ${r.p99OverTimeout} of a statement timeout; max ${r.underBurst.maxMs} ms) (goal p99 <= 1.5× steady, <= one statement timeout)`,
  );
}
