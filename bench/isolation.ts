// Isolation: how much one agent's slow or runaway statements slow everyone else down.
import type { Envelope } from '../src/contracts/envelope.ts';
import { databaseId, shardOf } from '../src/contracts/database-id.ts';
import { benchSite } from './agentdb-worker.ts';
import { round, summarise, type RunStats } from './stats.ts';

const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';
const counting = (n: number) => `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ${n}) SELECT count(*) FROM c`;
const settings = { database: 'agent' as const };
const READ_IN_FLIGHT = 8;

/** Readers' figures over a timed phase, and the codes of calls that failed. */
interface Phase extends RunStats {
  errors: Record<string, number>;
}

/** Runs `one` with `inFlight` lanes for `seconds`. */
async function driveFor(seconds: number, inFlight: number, one: (i: number) => Promise<Envelope>): Promise<Phase> {
  const latencies: number[] = [];
  const errors: Record<string, number> = {};
  const started = performance.now();
  const until = started + seconds * 1000;
  let next = 0;
  const lane = async () => {
    while (performance.now() < until) {
      const t = performance.now();
      const env = await one(next++);
      latencies.push(performance.now() - t);
      if (!env.ok) errors[env.error.code] = (errors[env.error.code] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return { ...summarise(latencies, (performance.now() - started) / 1000), errors };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
function medianOf(phases: Phase[]): Phase {
  const errors: Record<string, number> = {};
  for (const p of phases) for (const [code, n] of Object.entries(p.errors)) errors[code] = (errors[code] ?? 0) + n;
  return {
    calls: phases.reduce((n, p) => n + p.calls, 0),
    seconds: round(phases.reduce((n, p) => n + p.seconds, 0)),
    callsPerSec: median(phases.map((p) => p.callsPerSec)),
    p50Ms: median(phases.map((p) => p.p50Ms)),
    p99Ms: median(phases.map((p) => p.p99Ms)),
    errors,
  };
}

/**
 * Noisy neighbour: PK reads on 16 databases (other workspaces; half on the slow agent's shard)
 * with no slow statement, then while one database runs back-to-back statements of ~2 s, in
 * interleaved rounds. Hostile: the same reads while one agent keeps 32 runaway statements in
 * flight on its shard (each killed at STATEMENT_TIMEOUT_MS). One worker process, default pool.
 */
export async function benchIsolation(redisUrl: string, opts: { rounds: number; phaseSeconds: number }) {
  const site = benchSite(redisUrl, 'isolation');
  const { client } = site;
  const worker = await site.worker();
  try {
    const hostile = { workspace: 'evil', agent: 'hostile', settings };
    const shardCount = site.config.shardCount;
    const hostileShard = shardOf(databaseId(hostile.workspace, hostile.agent), shardCount);
    const readers: { workspace: string; agent: string; settings: typeof settings }[] = [];
    for (let i = 0; readers.length < 16; i++) {
      const near = shardOf(databaseId(`reader${i}`, 'r'), shardCount) === hostileShard;
      if (readers.filter((r) => (shardOf(databaseId(r.workspace, 'r'), shardCount) === hostileShard) === near).length < 8) {
        readers.push({ workspace: `reader${i}`, agent: 'r', settings });
      }
    }
    const must = (env: Envelope) => {
      if (!env.ok) throw new Error(`isolation bench: ${JSON.stringify(env)}`);
      return env;
    };
    const ids = JSON.stringify(Array.from({ length: 1000 }, (_, i) => i));
    for (const who of readers) {
      must((await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)' } })) as Envelope);
      const fill = { sql: "INSERT INTO kv SELECT value, 'value-' || value FROM json_each(?)", params: [ids] };
      must((await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: fill })) as Envelope);
    }
    const read = (i: number) =>
      client.call({
        ...readers[i % readers.length]!,
        tool: 'DATA_QUERY_SQL',
        arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [(i * 7) % 1000] },
      }) as Promise<Envelope>;
    await driveFor(3, READ_IN_FLIGHT, read);

    // About 2 s of counting, measured through agentdb on this machine now.
    const slow = { workspace: 'noisy', agent: 'slow', settings };
    const timeOne = async (n: number) => {
      const t = performance.now();
      must((await client.call({ ...slow, tool: 'DATA_QUERY_SQL', arguments: { sql: counting(n) } })) as Envelope);
      return performance.now() - t;
    };
    const n = Math.round(5_000_000 * (2000 / (await timeOne(5_000_000))));
    const slowMs = round(await timeOne(n), 0);

    const quiet: Phase[] = [];
    const noisy: Phase[] = [];
    let slowStatements = 0;
    for (let r = 0; r < opts.rounds; r++) {
      quiet.push(await driveFor(opts.phaseSeconds, READ_IN_FLIGHT, read));
      let stop = false;
      const loop = (async () => {
        while (!stop) {
          must((await client.call({ ...slow, tool: 'DATA_QUERY_SQL', arguments: { sql: counting(n) } })) as Envelope);
          slowStatements++;
        }
      })();
      noisy.push(await driveFor(opts.phaseSeconds, READ_IN_FLIGHT, read));
      stop = true;
      await loop;
    }

    // Last, since its runaway statements outlive the phase (each runs until it is killed).
    const quietBeforeHostile = await driveFor(opts.phaseSeconds, READ_IN_FLIGHT, read);
    let stop = false;
    const hostileOutcomes: Record<string, number> = {};
    for (let lane = 0; lane < 32; lane++) {
      void (async () => {
        while (!stop) {
          const env = (await client.call({ ...hostile, tool: 'DATA_QUERY_SQL', arguments: { sql: FOREVER } })) as Envelope;
          const code = env.ok ? 'ok' : env.error.code;
          hostileOutcomes[code] = (hostileOutcomes[code] ?? 0) + 1;
        }
      })().catch(() => undefined);
    }
    // Let its calls fill the shard's slots and the queue before reading.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const hostilePhases: Phase[] = [];
    for (let r = 0; r < opts.rounds; r++) hostilePhases.push(await driveFor(opts.phaseSeconds, READ_IN_FLIGHT, read));
    stop = true;
    const underHostile = medianOf(hostilePhases);
    // The quiet figure: every quiet phase of this run, the same length and reader count.
    const quietAll = medianOf([...quiet, quietBeforeHostile]);

    const q = medianOf(quiet);
    const z = medianOf(noisy);
    return {
      noisyNeighbour: {
        about: `${readers.length} databases read by primary key, ${READ_IN_FLIGHT} in flight; median of ${opts.rounds} interleaved rounds of ${opts.phaseSeconds} s`,
        slowStatementMs: slowMs,
        slowStatementsRun: slowStatements,
        quiet: q,
        withSlowNeighbour: z,
        ratios: { p50: round(z.p50Ms / q.p50Ms), p99: round(z.p99Ms / q.p99Ms) },
        goal: { p99AtMost: 1.5 },
      },
      hostile: {
        about: `one agent keeps 32 runaway statements in flight on shard ${hostileShard}; 8 readers on that shard, 8 on others; median of ${opts.rounds} phases of ${opts.phaseSeconds} s against every quiet phase`,
        quiet: quietAll,
        underHostile,
        hostileOutcomesSoFar: hostileOutcomes,
        ratios: { p50: round(underHostile.p50Ms / quietAll.p50Ms), p99: round(underHostile.p99Ms / quietAll.p99Ms) },
        readersNoWorker: underHostile.errors.NO_WORKER ?? 0,
        goal: { p99AtMost: 3, noWorker: 0 },
      },
    };
  } finally {
    // SIGKILL: a graceful stop would wait for the runaway statements still in hand.
    await worker.stop('SIGKILL');
    await site.close();
  }
}
