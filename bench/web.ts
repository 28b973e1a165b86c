// The web page's reads: a grid page of 100 rows from a 1,000,000-row table (first page, the
// next page after page 4,999 by keyset, a jump straight to page 5,000) and the CSV export's
// MB/s against better-sqlite3 writing the same CSV directly, in the same run.
import { randomUUID } from 'node:crypto';
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import type { PageArgs } from '../src/contracts/browse.ts';
import { loadConfig } from '../src/config.ts';
import { AgentDbClient } from '../src/calls/client.ts';
import { DataBrowser } from '../src/shards/data-browser.ts';
import { keysFor } from '../src/redis/keys.ts';
import { ShardOpClient } from '../src/shards/shard-op-client.ts';
import { ShardWorkerPool } from '../src/shards/shard-worker-pool.ts';
import { AgentRegistry } from '../src/registry/agents.ts';
import { csvHeader, csvRecord } from '../src/sqlite/csv-format.ts';
import { databasePath, shardOf } from '../src/contracts/database-id.ts';
import { deleteKeys } from '../test/helpers/harness.ts';
import { quantile, round } from './stats.ts';

const ROWS = Number(process.env.BENCH_WEB_ROWS ?? 1_000_000);
const SAMPLES = Number(process.env.BENCH_WEB_SAMPLES ?? 50);
const PAGE = 100;

const p50 = (xs: number[]) =>
  round(
    quantile(
      [...xs].sort((a, b) => a - b),
      0.5,
    ),
  );

async function timed(n: number, one: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await one();
    out.push(performance.now() - t);
  }
  return out;
}

/** Writes chunks to a file with backpressure (what the HTTP route's stream does to a socket). */
async function writeAll(file: string, chunks: AsyncIterable<string> | Iterable<string>): Promise<number> {
  const out = createWriteStream(file);
  for await (const c of chunks) if (!out.write(c)) await once(out, 'drain');
  out.end();
  await once(out, 'finish');
  return statSync(file).size;
}

/** The same CSV, straight from the file with better-sqlite3: the baseline. */
function* directCsv(file: string, table: string): Generator<string> {
  const db = new Database(file, { readonly: true });
  try {
    const stmt = db.prepare(`SELECT * FROM "${table}" ORDER BY rowid`).raw(true).safeIntegers(true);
    let buf = csvHeader(stmt.columns().map((c) => c.name));
    for (const row of stmt.iterate() as Iterable<unknown[]>) {
      buf += csvRecord(row);
      if (buf.length >= 1024 * 1024) {
        yield buf;
        buf = '';
      }
    }
    if (buf) yield buf;
  } finally {
    db.close();
  }
}

/** Runs the web figures on a sandboxed prefix and data folder; returns them. */
export async function benchWeb(redisUrl: string) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-web-'));
  const prefix = `bw-${randomUUID().slice(0, 8)}`;
  const config = loadConfig({
    REDIS_URL: redisUrl,
    AGENTDB_PREFIX: prefix,
    AGENTDB_DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    STATEMENT_TIMEOUT_MS: '120000',
    SHARD_COUNT: '4',
  });
  const pool = new ShardWorkerPool({ config, shards: [0, 1, 2, 3], logger: pino({ level: 'silent' }) });
  await pool.start();
  const client = new AgentDbClient({ redisUrl, prefix, shardCount: config.shardCount, rateLimits: false });
  const ops = new ShardOpClient({ redisUrl, prefix });
  const redis = new Redis(redisUrl);
  const browser = new DataBrowser({ ops, agents: new AgentRegistry(redis, keysFor(prefix)), shardCount: config.shardCount });
  const who = { workspace: 'bench', agent: 'grid', settings: { database: 'agent' as const } };
  const db = 'bench/grid';
  try {
    for (const sql of [
      'CREATE TABLE big(id INTEGER PRIMARY KEY, name TEXT, score REAL, note TEXT)',
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS})
       INSERT INTO big SELECT i, 'name ' || i, (i * 7919) % 100000 / 100.0, CASE WHEN i % 10 = 0 THEN '=formula, "quoted"' ELSE 'note ' || i END FROM n`,
    ]) {
      const out = await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql } }, { timeoutMs: 300_000 });
      if (!out.ok) throw new Error(`bench setup failed: ${JSON.stringify(out)}`);
    }
    const page = (args: Omit<PageArgs, 'table'>) => browser.page(db, { table: 'big', limit: PAGE, ...args }, { workspace: who.workspace, member: 'bench' });
    // Warm the path (JIT, connections, page cache) before measuring.
    await timed(20, () => page({}));
    await timed(5, () => page({ offset: 499_900 }));

    const first = await timed(SAMPLES, () => page({}));
    const firstCounted = await timed(SAMPLES, () => page({ count: true }));
    const p4999 = await page({ offset: (4999 - 1) * PAGE });
    const afterCursor = p4999.last!;
    const next = await timed(SAMPLES, () => page({ after: afterCursor }));
    const check = await page({ after: afterCursor });
    if (check.rows[0]![0] !== 4999 * PAGE + 1) throw new Error(`keyset page 5,000 starts at ${String(check.rows[0]![0])}`);
    const jump = await timed(SAMPLES, () => page({ offset: (5000 - 1) * PAGE }));
    const sqlite = (await page({ after: afterCursor })).sqliteMs;

    const tmp = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-csv-'));
    const file = databasePath(dataDir, 'bench', 'grid', shardOf(db, config.shardCount));
    const runs = { export: [] as number[], direct: [] as number[] };
    let bytes = 0;
    for (let r = 0; r < 3; r++) {
      // Interleaved, so noise on this shared machine hits both alike.
      let t = performance.now();
      bytes = await writeAll(path.join(tmp, 'export.csv'), browser.csv(db, 'big', { workspace: 'bench', member: 'bench' }));
      runs.export.push(bytes / 1e6 / ((performance.now() - t) / 1000));
      t = performance.now();
      const direct = await writeAll(path.join(tmp, 'direct.csv'), directCsv(file, 'big'));
      runs.direct.push(direct / 1e6 / ((performance.now() - t) / 1000));
      if (direct !== bytes) throw new Error(`export ${bytes} bytes, direct ${direct} bytes`);
    }
    rmSync(tmp, { recursive: true, force: true });
    const exportMBps = p50(runs.export);
    const directMBps = p50(runs.direct);
    return {
      rows: ROWS,
      pageSize: PAGE,
      samples: SAMPLES,
      grid: {
        firstPageP50Ms: p50(first),
        firstPageWithCountP50Ms: p50(firstCounted),
        nextAfterPage4999P50Ms: p50(next),
        jumpToPage5000P50Ms: p50(jump),
        keysetSqliteMs: round(sqlite),
        ratios: { nextAfter4999VsFirst: round(p50(next) / p50(first)), jumpVsFirst: round(p50(jump) / p50(first)) },
        goal: { nextAfter4999VsFirstAtMost: 2 },
      },
      csv: { megabytes: round(bytes / 1e6, 1), exportMBps, directMBps, ratio: round(exportMBps / directMBps), goal: { ratioAtLeast: 0.5 } },
    };
  } finally {
    await ops.close();
    await client.close();
    await pool.stop();
    redis.disconnect();
    await deleteKeys(prefix);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Prints the figures in the bench's style. */
export function printWeb(w: Awaited<ReturnType<typeof benchWeb>>): void {
  const g = w.grid;
  console.log(`\nweb grid, ${w.pageSize} rows of a ${w.rows.toLocaleString('en')}-row table (server time p50 of ${w.samples}):`);
  console.log(
    `  first page ${g.firstPageP50Ms} ms (${g.firstPageWithCountP50Ms} ms with the row count), next after page 4,999 ${g.nextAfterPage4999P50Ms} ms (×${g.ratios.nextAfter4999VsFirst}, goal <= 2), jump to page 5,000 ${g.jumpToPage5000P50Ms} ms (×${g.ratios.jumpVsFirst})`,
  );
  console.log(
    `web CSV export: ${w.csv.exportMBps} MB/s vs better-sqlite3 direct ${w.csv.directMBps} MB/s: ×${w.csv.ratio} (goal >= 0.5; ${w.csv.megabytes} MB)`,
  );
}

// Alone: `node --import tsx bench/web.ts`.
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  printWeb(await benchWeb(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'));
}
