// Scaling: calls/s of a CPU-bound read over many databases, one executor child against the pool.
import { readFileSync } from 'node:fs';
import type { Envelope } from '../src/contracts/envelope.ts';
import { connectRedis } from '../src/redis/connection.ts';
import { benchSite } from './agentdb-worker.ts';
import { childPids, cpuSeconds, machineCpu } from './cpu.ts';
import { drive, round, summarise, type RunStats } from './stats.ts';

const DATABASES = 64;
const IN_FLIGHT = 64;
/**
 * Two aggregates over the 10,000 rows. The heavy one builds two DISTINCT sets (SQLite's own time
 * about 11 ms, a warm statement in one process, on a quiet machine; SQLite caches pages, never
 * results, so every call does that work); the light one groups (about 1.9 ms). Everything else a
 * call costs — BullMQ, the worker, Redis, the client — is about 1.6-2 ms of CPU on this machine,
 * so on 2 cores the light one can gain at most about 1.1-1.3× from a second child: the heavy one
 * shows what the pool does for CPU-bound work, the light one where the rest of the CPU goes.
 * (One DISTINCT, about 5 ms, gave 1.2-1.7×: a third of the machine went to the per-call rest.)
 */
const AGGREGATES = {
  heavy: 'SELECT count(DISTINCT s), count(DISTINCT v || s), sum(v), avg(length(s)) FROM t',
  light: 'SELECT v % 10 AS k, sum(v), count(*) FROM t GROUP BY k',
};
const settings = { database: 'agent' as const };

/** Where the machine's CPU went during a run, in CPU seconds per 1000 calls. */
interface CpuShare {
  worker: number;
  executors: number;
  redis: number;
  benchClient: number;
  /** Busy time of every other process on the machine (other users included). */
  otherProcesses: number;
  idle: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const med = (runs: RunStats[]): RunStats => ({
  calls: runs[0]!.calls,
  seconds: median(runs.map((x) => x.seconds)),
  callsPerSec: median(runs.map((x) => x.callsPerSec)),
  p50Ms: median(runs.map((x) => x.p50Ms)),
  p99Ms: median(runs.map((x) => x.p99Ms)),
});
function medCpu(xs: CpuShare[]): CpuShare {
  const keys = Object.keys(xs[0]!) as (keyof CpuShare)[];
  return Object.fromEntries(keys.map((k) => [k, median(xs.map((x) => x[k]))])) as unknown as CpuShare;
}

/**
 * Aggregates over 10,000 rows, spread over 64 databases (one workspace each, so the workspace
 * share does not serialise them), 64 in flight: a worker with one executor child against one
 * with the default pool, in alternating rounds, each worker started fresh and warmed up.
 */
export async function benchScaling(redisUrl: string, opts: { rounds: number; calls: number }) {
  const redisPid = await localRedisPid(redisUrl);
  const site = benchSite(redisUrl, 'scaling');
  const { client } = site;
  const dbs = Array.from({ length: DATABASES }, (_, i) => ({ workspace: `scale${i}`, agent: 'a', settings }));
  const must = (env: Envelope) => {
    if (!env.ok) throw new Error(`scaling bench: ${JSON.stringify(env)}`);
  };
  try {
    const seeder = await site.worker();
    const rows = 'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000) SELECT i, (i * 7919) % 1000, hex(randomblob(8)) FROM n';
    await Promise.all(
      dbs.map(async (who) => {
        must(
          (await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER, s TEXT)' } })) as Envelope,
        );
        must((await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: `INSERT INTO t ${rows}` } })) as Envelope);
      }),
    );
    await seeder.stop();

    const poolSize = site.config.executorPoolSize;
    const measure = async (sql: string) => {
      const query = (i: number) => client.call({ ...dbs[i % DATABASES]!, tool: 'DATA_QUERY_SQL', arguments: { sql } }).then((e) => must(e as Envelope));
      const sides = { one: [] as RunStats[], pool: [] as RunStats[] };
      const cpu: Record<'one' | 'pool', CpuShare[]> = { one: [], pool: [] };
      for (let r = 0; r < opts.rounds; r++) {
        for (const side of ['one', 'pool'] as const) {
          const worker = await site.worker(side === 'one' ? { EXECUTOR_POOL_SIZE: '1' } : {});
          await drive(DATABASES * 4, IN_FLIGHT, query);
          const procs = () => ({ worker: cpuSeconds(worker.pid), executors: childPids(worker.pid).reduce((n, p) => n + cpuSeconds(p), 0) });
          const before = { ...procs(), redis: redisPid ? cpuSeconds(redisPid) : 0, client: process.cpuUsage(), machine: machineCpu() };
          const d = await drive(opts.calls, IN_FLIGHT, query);
          const after = { ...procs(), redis: redisPid ? cpuSeconds(redisPid) : 0, client: process.cpuUsage(before.client), machine: machineCpu() };
          sides[side].push(summarise(d.latencies, d.seconds));
          const per = (x: number) => round((x * 1000) / opts.calls, 3);
          const clientCpu = (after.client.user + after.client.system) / 1e6;
          const ours = after.worker - before.worker + (after.executors - before.executors) + (after.redis - before.redis) + clientCpu;
          const busy = after.machine.busy - before.machine.busy;
          cpu[side].push({
            worker: per(after.worker - before.worker),
            executors: per(after.executors - before.executors),
            redis: per(after.redis - before.redis),
            benchClient: per(clientCpu),
            otherProcesses: per(Math.max(0, busy - ours)),
            idle: per(after.machine.total - before.machine.total - busy),
          });
          await worker.stop();
        }
      }
      const one = med(sides.one);
      const pool = med(sides.pool);
      return {
        sql,
        oneChild: one,
        defaultPool: pool,
        ratio: round(pool.callsPerSec / one.callsPerSec),
        cpuSecondsPer1000Calls: { oneChild: medCpu(cpu.one), defaultPool: medCpu(cpu.pool) },
      };
    };
    const heavy = await measure(AGGREGATES.heavy);
    const light = await measure(AGGREGATES.light);
    return {
      about: `aggregates over 10,000 rows, ${DATABASES} databases, ${IN_FLIGHT} in flight; median of ${opts.rounds} alternating rounds, a fresh worker each`,
      poolSize,
      heavy,
      light,
      goal: { atLeast: 1.3 },
    };
  } finally {
    await site.close();
  }
}

/** The pid of the Redis server when it runs on this machine, to count its CPU. */
async function localRedisPid(redisUrl: string): Promise<number | undefined> {
  const redis = connectRedis(redisUrl);
  try {
    const pid = Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1]);
    return readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('redis') ? pid : undefined;
  } catch {
    return undefined;
  } finally {
    redis.disconnect();
  }
}
