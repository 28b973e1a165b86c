// `npm run bench:charts`: draws docs/charts/*.svg from the results files under bench/results/.
// PK read p50/p99 and memory by number of databases from many-databases-latest.json (written by
// `npm run bench:scale`) or else latest.json's `manyDatabases` (`npm run bench`); throughput by
// concurrency from query-only-latest.json (bench/query-only.ts) or else latest.json's `query`.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { ManyDatabasesPoint } from './many-databases.ts';
import type { RunStats } from './stats.ts';
import { lineChart, type LineChart } from './svg-chart.ts';

/** The PK-read results of raw BullMQ and agentdb, one call at a time and 64 in flight. */
export interface QueryResults {
  sequential: { rawBullmq: RunStats; agentdb: RunStats };
  inFlight64: { rawBullmq: RunStats; agentdb: RunStats };
}

/** The charts drawn from the results: file name (under docs/charts/) to chart. */
export function charts(many: readonly ManyDatabasesPoint[] | undefined, query: (QueryResults & { at?: string }) | undefined): Record<string, LineChart> {
  const out: Record<string, LineChart> = {};
  if (many?.length) {
    out['pk-read-by-databases.svg'] = {
      title: 'PK read of a random database, one at a time',
      xLabel: 'databases',
      yLabel: 'ms',
      logX: true,
      series: [
        { name: 'p50', points: many.map((p) => [p.databases, p.read.p50Ms]) },
        { name: 'p99', points: many.map((p) => [p.databases, p.read.p99Ms]) },
      ],
    };
    out['memory-by-databases.svg'] = {
      title: 'Resident memory after the reads',
      xLabel: 'databases',
      yLabel: 'MB',
      logX: true,
      series: [
        { name: 'worker', points: many.map((p) => [p.databases, p.workerRssMb]) },
        { name: 'executor children', points: many.map((p) => [p.databases, p.executorRssMb.reduce((a, b) => a + b, 0)]) },
        { name: 'in all', points: many.map((p) => [p.databases, p.totalRssMb]) },
      ],
    };
    const backedUp = many.filter((p) => p.backup);
    const sampled = backedUp.some((p) => p.backup?.sampled);
    out['startup-backup-by-databases.svg'] = {
      title: `Worker start-up and backup of every database${sampled ? ' (backup: a sample, extrapolated)' : ''}`,
      xLabel: 'databases',
      yLabel: 'seconds',
      logX: true,
      series: [
        { name: 'start-up', points: many.map((p) => [p.databases, p.startupMs / 1000]) },
        { name: 'first backup', points: backedUp.map((p) => [p.databases, p.backup!.seconds]) },
        { name: 'next backup', points: backedUp.map((p) => [p.databases, p.backup!.againSeconds]) },
      ],
    };
  }
  if (query) {
    const side = (k: 'rawBullmq' | 'agentdb') =>
      [
        [1, query.sequential[k].callsPerSec],
        [64, query.inFlight64[k].callsPerSec],
      ] as const;
    out['throughput-by-concurrency.svg'] = {
      title: `PK read throughput by calls in flight${query.at ? ` (${query.at.slice(0, 10)})` : ''}`,
      xLabel: 'calls in flight',
      yLabel: 'calls/s',
      series: [
        { name: 'raw BullMQ', points: side('rawBullmq') },
        { name: 'agentdb', points: side('agentdb') },
      ],
    };
  }
  return out;
}

/** The PK read of the newest results file that has one (the dated files kept in git), with its date. */
function newestQuery(dir: URL): (QueryResults & { at: string }) | undefined {
  const found = readdirSync(dir)
    .filter((f) => f.endsWith('.json') && !f.startsWith('history-'))
    .map((f) => read<{ at?: string; query?: QueryResults }>(new URL(f, dir)))
    .filter((r): r is { at: string; query: QueryResults } => Boolean(r?.at && r.query?.sequential && r.query.inFlight64))
    .sort((a, b) => (a.at < b.at ? 1 : -1))[0];
  return found && { ...found.query, at: found.at };
}

function read<T>(file: URL): T | undefined {
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as T) : undefined;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const results = new URL('./results/', import.meta.url);
  const latest = read<{ manyDatabases?: ManyDatabasesPoint[]; query?: QueryResults }>(new URL('latest.json', results));
  const many = read<{ manyDatabases: ManyDatabasesPoint[] }>(new URL('many-databases-latest.json', results))?.manyDatabases ?? latest?.manyDatabases;
  const query = read<QueryResults>(new URL('query-only-latest.json', results)) ?? latest?.query ?? newestQuery(results);
  const docs = new URL('../docs/charts/', import.meta.url);
  mkdirSync(docs, { recursive: true });
  for (const [name, chart] of Object.entries(charts(many, query))) {
    writeFileSync(new URL(name, docs), lineChart(chart));
    console.log(`docs/charts/${name}`);
  }
}
