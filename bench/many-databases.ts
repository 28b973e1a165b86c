// Flat as it grows (issue 31 part 3): what a worker costs at 10 to 100,000 databases.
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Envelope } from '../src/contracts/envelope.ts';
import { databasePath, shardOf } from '../src/contracts/database-id.ts';
import { historyDir } from '../src/history/history-files.ts';
import { writeSeal, type Seal } from '../src/history/seal.ts';
import { runBackups } from '../src/shards/backups.ts';
import { ShardOpClient } from '../src/shards/shard-op-client.ts';
import { benchSite } from './agentdb-worker.ts';
import { childPids, rssMb } from './cpu.ts';
import { drive, round, summarise, type RunStats } from './stats.ts';

/** Databases per workspace: 100,000 in one workspace folder is no one's layout, 100 a plausible one. */
const PER_WORKSPACE = 100;
const ROWS = 1000;

/** The figures at one count of databases. */
export interface ManyDatabasesPoint {
  databases: number;
  /** Seconds to copy the template into every database (not measured against anything). */
  createSeconds: number;
  /** From spawning `agentdb worker` to its "worker ready" line (every shard's lease owned). */
  startupMs: number;
  /** Sequential PK reads, each of a database picked at random among all of them. */
  read: RunStats;
  /** Resident memory after the reads: the worker and each executor child. */
  workerRssMb: number;
  executorRssMb: number[];
  totalRssMb: number;
  /**
   * The backup op over every database, to a folder blob store: the first (every file uploaded
   * and verified), then again with nothing written since (`againSeconds`).
   */
  backup: { seconds: number; databases: number; failed: number; againSeconds: number; sampled?: number } | undefined;
  /**
   * The same start-up, reads and memory from another build's worker (BENCH_SCALE_BASELINE_BIN),
   * on the same databases, run just before or after this build's (in turn by count), so a
   * change is measured under the same load.
   */
  baseline?: WorkerFigures;
}

/** What one worker's run at a count measured. */
type WorkerFigures = Pick<ManyDatabasesPoint, 'startupMs' | 'read' | 'workerRssMb' | 'executorRssMb' | 'totalRssMb'>;

/**
 * How much of the backup to run: every database (`all`, what a night costs), none (`off`), or a
 * sample of that many databases, one at a time, whose time per database is multiplied by the
 * count (`sampled` in the point says so): the first backup of 100,000 would take hours.
 */
export type BackupScope = 'all' | 'off' | number;

/** BENCH_SCALE_BACKUP's value: `all`, `off`, or a sample size. */
export function backupScope(value: string | undefined): BackupScope {
  if (value === undefined || value === 'all') return 'all';
  if (value === 'off') return 'off';
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`BENCH_SCALE_BACKUP must be all, off or a positive integer, got ${value}`);
  return n;
}

/** Database `i`'s names: `w<i/100>/d<i%100>`. */
const nameOf = (i: number) => ({ workspace: `w${Math.floor(i / PER_WORKSPACE)}`, agent: `d${i % PER_WORKSPACE}` });

/**
 * At each count: a fresh site (prefix, data folder); one database written through calls (a
 * table of 1,000 rows, with its history), then copied file by file to the others — the database
 * file and its history folder, as the worker left them once stopped; nothing else of a database
 * lives in Redis. Then a fresh worker is started and timed, reads random databases, and the
 * backup op runs over all of them.
 */
export async function benchManyDatabases(
  redisUrl: string,
  counts: number[],
  opts: {
    reads: number;
    warmup?: number;
    backup?: BackupScope;
    bin?: string;
    baselineBin?: string;
    /** Reads go to the first this many databases only (all when absent): the handle cache's share, apart from the count on disk. */
    workingSet?: number;
    log?: (msg: string) => void;
  },
): Promise<ManyDatabasesPoint[]> {
  const points: ManyDatabasesPoint[] = [];
  for (const [nth, databases] of counts.entries()) {
    const site = benchSite(redisUrl, `many-${databases}`, { WORKSPACE_MAX_DATABASES: String(Math.max(1000, PER_WORKSPACE * 2)) });
    try {
      const { client, config } = site;
      const must = (env: unknown) => {
        if (!(env as Envelope).ok) throw new Error(`many-databases bench: ${JSON.stringify(env)}`);
      };
      const template = nameOf(0);
      const seeder = await site.worker();
      must(
        await client.call({
          ...template,
          settings: { database: 'agent' },
          tool: 'DATA_WRITE_SQL',
          arguments: { sql: 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)' },
        }),
      );
      must(
        await client.call({
          ...template,
          settings: { database: 'agent' },
          tool: 'DATA_WRITE_SQL',
          arguments: {
            sql: `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS - 1}) INSERT INTO kv SELECT i, 'value-' || i FROM n`,
          },
        }),
      );
      await seeder.stop();

      const created = performance.now();
      const dbFile = (i: number) => {
        const { workspace, agent } = nameOf(i);
        return databasePath(config.dataDir, workspace, agent, shardOf(`${workspace}/${agent}`, config.shardCount));
      };
      const from = dbFile(0);
      const fromHistory = historyDir(config.dataDir, `${template.workspace}/${template.agent}`);
      const seal = sealOf(fromHistory);
      const sidecars = readdirSync(path.dirname(from)).filter((f) => f.startsWith(`${path.basename(from)}-`));
      for (let i = 1; i < databases; i++) {
        const { workspace, agent } = nameOf(i);
        const to = dbFile(i);
        mkdirSync(path.dirname(to), { recursive: true });
        cpSync(from, to);
        for (const s of sidecars) cpSync(path.join(path.dirname(from), s), `${to}${s.slice(path.basename(from).length)}`);
        if (!seal) continue;
        const toHistory = historyDir(config.dataDir, `${workspace}/${agent}`);
        cpSync(fromHistory, toHistory, { recursive: true });
        // The seal names the file it holds for (inode, times): a copy is a new file, which the
        // worker would take for one written behind history's back and snapshot again on open.
        writeSeal(path.join(toHistory, 'generations', seal.generation), to, seal.segment, seal.frames);
      }
      const createSeconds = round((performance.now() - created) / 1000, 1);
      opts.log?.(`${databases} databases created in ${createSeconds} s`);

      const read = (i: number) =>
        client
          .call({
            ...nameOf(Math.floor(Math.random() * Math.min(databases, opts.workingSet ?? databases))),
            settings: { database: 'agent' },
            tool: 'DATA_QUERY_SQL',
            arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % ROWS] },
          })
          .then(must);
      const run = async (bin?: string) => {
        const spawned = performance.now();
        const worker = await site.worker({}, bin);
        const startupMs = round(performance.now() - spawned, 0);
        // Warm-up: JIT in every process, connections; at 10 databases every handle opens here.
        await drive(opts.warmup ?? Math.min(500, opts.reads), 1, read);
        const d = await drive(opts.reads, 1, read);
        const workerRssMb = rssMb(worker.pid);
        const executorRssMb = childPids(worker.pid).map(rssMb);
        const figures: WorkerFigures = {
          startupMs,
          read: summarise(d.latencies, d.seconds),
          workerRssMb,
          executorRssMb,
          totalRssMb: round(workerRssMb + executorRssMb.reduce((a, b) => a + b, 0), 1),
        };
        return { worker, figures };
      };
      // The baseline first at every other count, so neither build always meets the colder files.
      const baselineFirst = opts.baselineBin !== undefined && nth % 2 === 0;
      const baselineRun = async () => {
        if (opts.baselineBin === undefined) return undefined;
        const b = await run(opts.baselineBin);
        await b.worker.stop();
        return b.figures;
      };
      const before = baselineFirst ? await baselineRun() : undefined;
      const { worker, figures } = await run(opts.bin);

      const scope = opts.backup ?? 'all';
      const backup =
        scope === 'off'
          ? undefined
          : scope === 'all'
            ? await backupAll(redisUrl, config.prefix, config.shardCount)
            : await backupSample(redisUrl, config.prefix, config.shardCount, databases, scope);
      await worker.stop();
      const baseline = baselineFirst ? before : await baselineRun();
      const point: ManyDatabasesPoint = { databases, createSeconds, ...figures, backup, ...(baseline ? { baseline } : {}) };
      opts.log?.(JSON.stringify(point));
      points.push(point);
    } finally {
      await site.close();
    }
  }
  return points;
}

/** The backup op over every shard, twice (the second finds nothing new). */
async function backupAll(redisUrl: string, prefix: string, shardCount: number): Promise<NonNullable<ManyDatabasesPoint['backup']>> {
  const timed = async () => {
    const ops = new ShardOpClient({ redisUrl, prefix });
    const started = performance.now();
    const run = await runBackups(ops, shardCount, { reason: 'manual' }).finally(() => ops.close());
    return { run, seconds: round((performance.now() - started) / 1000, 1) };
  };
  const first = await timed();
  // The next night's, nothing written since: what most nights of most databases cost.
  const again = await timed();
  return {
    seconds: first.seconds,
    databases: first.run.databases.length,
    failed: first.run.failed.length + first.run.databases.filter((r) => r.error || r.damaged).length,
    againSeconds: again.seconds,
  };
}

/**
 * The backup op of `sample` databases picked at random, one at a time, first and again; each
 * total is the mean per database times `databases` (extrapolated: a night's run goes shard by
 * shard, all shards at once, and also lists each shard's databases, which a sample does not).
 */
async function backupSample(
  redisUrl: string,
  prefix: string,
  shardCount: number,
  databases: number,
  sample: number,
): Promise<NonNullable<ManyDatabasesPoint['backup']>> {
  const picked = new Set<number>();
  while (picked.size < Math.min(sample, databases)) picked.add(Math.floor(Math.random() * databases));
  const ids = [...picked].map((i) => {
    const { workspace, agent } = nameOf(i);
    return `${workspace}/${agent}`;
  });
  const ops = new ShardOpClient({ redisUrl, prefix });
  try {
    let failed = 0;
    const pass = async () => {
      const started = performance.now();
      for (const db of ids) {
        const run = await runBackups(ops, shardCount, { db, reason: 'manual' });
        failed += run.databases.filter((r) => r.error || r.damaged).length;
      }
      return ((performance.now() - started) / 1000 / ids.length) * databases;
    };
    const first = await pass();
    const again = await pass();
    return { seconds: round(first, 1), databases: ids.length, failed, againSeconds: round(again, 1), sampled: ids.length };
  } finally {
    await ops.close();
  }
}

/** Prints the table of {@link benchManyDatabases}, with p50 against the smallest count's. */
export function printManyDatabases(points: ManyDatabasesPoint[]): void {
  const base = points[0]!;
  console.log('\nPK read of a random database, memory, start-up and backup by number of databases');
  console.log('databases   p50 ms (×)        p99 ms   worker MB  executors MB     start-up ms  backup s (again)');
  for (const p of points) {
    console.log(
      `${String(p.databases).padStart(9)}   ${`${p.read.p50Ms} (×${round(p.read.p50Ms / base.read.p50Ms, 2)})`.padEnd(16)}  ${String(p.read.p99Ms).padStart(7)}  ${String(p.workerRssMb).padStart(9)}  ${p.executorRssMb.join('+').padEnd(14)}  ${String(p.startupMs).padStart(10)}  ${backupCell(p.backup)}`,
    );
  }
  const first = base.baseline;
  if (!first) return;
  console.log('\nThe same from the baseline build (BENCH_SCALE_BASELINE_BIN), run in turn on the same databases');
  console.log('databases   p50 ms (×)        p99 ms   worker MB  executors MB     start-up ms');
  for (const p of points) {
    const b = p.baseline;
    if (!b) continue;
    console.log(
      `${String(p.databases).padStart(9)}   ${`${b.read.p50Ms} (×${round(b.read.p50Ms / first.read.p50Ms, 2)})`.padEnd(16)}  ${String(b.read.p99Ms).padStart(7)}  ${String(b.workerRssMb).padStart(9)}  ${b.executorRssMb.join('+').padEnd(14)}  ${String(b.startupMs).padStart(10)}`,
    );
  }
}

function backupCell(b: ManyDatabasesPoint['backup']): string {
  if (!b) return '    (off)';
  return `${String(b.seconds).padStart(8)} (${b.againSeconds}; ${b.sampled ? `${b.sampled} sampled, extrapolated` : `${b.databases} dbs`})`;
}

/** The template's last generation and its seal (written by the worker's last close), if any. */
function sealOf(historyRoot: string): (Seal & { generation: string }) | undefined {
  if (!existsSync(historyRoot)) return undefined;
  const generation = readdirSync(path.join(historyRoot, 'generations')).sort().at(-1);
  if (!generation) return undefined;
  try {
    return { ...(JSON.parse(readFileSync(path.join(historyRoot, 'generations', generation, 'sealed.json'), 'utf8')) as Seal), generation };
  } catch {
    return undefined;
  }
}
