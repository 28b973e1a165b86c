// `npm run bench:scale`: the many-databases scenario alone, up to 100,000 databases (a few
// minutes each past 10,000). BENCH_SCALE_COUNTS (comma-separated, default 10,1000,10000,100000),
// BENCH_SCALE_READS (sequential reads per count, default 2000), BENCH_SCALE_BACKUP (all, off,
// or a number of databases to sample and extrapolate from; default all), BENCH_SCALE_WARMUP
// (unmeasured reads first, default 500), BENCH_SCALE_BIN (the build to measure, default dist/'s
// bin/agentdb.js), BENCH_SCALE_BASELINE_BIN (another build's, run in turn on the same databases:
// an A/B under the same load), BENCH_SCALE_WORKING_SET (reads go to the first this many
// databases only: with HANDLE_CACHE_SIZE above it, every read past the warm-up finds its handle
// open, whatever the count on disk). Writes
// bench/results/many-databases-latest.json, from which `bench/charts.ts` draws docs/charts/.
import { mkdirSync, writeFileSync } from 'node:fs';
import { backupScope, benchManyDatabases, printManyDatabases } from './many-databases.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const counts = (process.env.BENCH_SCALE_COUNTS ?? '10,1000,10000,100000').split(',').map(Number);
const reads = Number(process.env.BENCH_SCALE_READS ?? 2000);
const backup = backupScope(process.env.BENCH_SCALE_BACKUP);
const warmup = process.env.BENCH_SCALE_WARMUP === undefined ? undefined : Number(process.env.BENCH_SCALE_WARMUP);
const bin = process.env.BENCH_SCALE_BIN;
const baselineBin = process.env.BENCH_SCALE_BASELINE_BIN;
const workingSet = process.env.BENCH_SCALE_WORKING_SET === undefined ? undefined : Number(process.env.BENCH_SCALE_WORKING_SET);
const points = await benchManyDatabases(REDIS_URL, counts, {
  reads,
  ...(bin ? { bin } : {}),
  ...(baselineBin ? { baselineBin } : {}),
  ...(warmup === undefined ? {} : { warmup }),
  ...(workingSet === undefined ? {} : { workingSet }),
  backup,
  log: (m) => process.stderr.write(`[bench:scale ${new Date().toISOString()}] ${m}\n`),
});
printManyDatabases(points);
const dir = new URL('./results/', import.meta.url);
mkdirSync(dir, { recursive: true });
const results = { at: new Date().toISOString(), reads, backup, ...(workingSet === undefined ? {} : { workingSet }), manyDatabases: points };
writeFileSync(new URL('many-databases-latest.json', dir), `${JSON.stringify(results, null, 2)}\n`);
