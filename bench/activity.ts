// `npm run bench:activity`: what a page of a database's activity list costs the shard worker's
// thread (review H29-4), at ACTIVITY_BENCH_COMMITS commits (40,000): the listing that read the
// whole history for every page (test/helpers/activity-oracle.ts) against the kept one
// (ActivityCache): the first page read cold, the first page again after one more call, and page
// 50 (limit 50). All in this thread, rows read from the file here (the worker gets them from the
// executor child: its thread then parses the rows' JSON instead of reading SQLite). Ratios are
// against the old listing in the same run.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type Database from 'better-sqlite3';
import { pino } from 'pino';
import { loadConfig } from '../src/config.ts';
import { AgentDbClient } from '../src/calls/client.ts';
import { databasePath, shardOf } from '../src/contracts/database-id.ts';
import { HistoryClient } from '../src/shards/history-client.ts';
import { ShardOpClient } from '../src/shards/shard-op-client.ts';
import { ShardWorkerPool } from '../src/shards/shard-worker-pool.ts';
import { deleteKeys } from '../test/helpers/harness.ts';
import { capture } from '../src/history/capture.ts';
import { localSource } from '../src/history/history-files.ts';
import { ActivityCache } from '../src/history/activity-cache.ts';
import type { ActivityRows } from '../src/history/activity-rows.ts';
import { activityPage, type ActivityPage } from '../src/history/activity-view.ts';
import { activitySince, readActivity, recordCallActivity, type ActivityRow } from '../src/sqlite/sqlite-activity.ts';
import { wholeHistoryPage } from '../test/helpers/activity-oracle.ts';
import { buildActivity } from '../test/helpers/activity-build.ts';

const COMMITS = Number(process.env.ACTIVITY_BENCH_COMMITS ?? 40_000);
const ROUNDS = Number(process.env.ACTIVITY_BENCH_ROUNDS ?? 5);
const MB = 1024 * 1024;
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ID = 'bench/activity';

const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function rowsOf(db: Database.Database): ActivityRows {
  return {
    all: async () => readActivity(db) as Pick<ActivityRow, 'seq' | 'kind' | 'at'>[],
    some: async (seqs) => readActivity(db, seqs) as ActivityRow[],
    since: async (after) => activitySince(db, after),
  };
}

/** Wall and this thread's CPU milliseconds of `f`. */
async function timed<T>(f: () => Promise<T>): Promise<{ ms: number; cpuMs: number; out: T }> {
  const cpu = process.cpuUsage();
  const t = performance.now();
  const out = await f();
  const ms = performance.now() - t;
  const used = process.cpuUsage(cpu);
  return { ms, cpuMs: (used.user + used.system) / 1000, out };
}

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-activity-'));
  try {
    const file = path.join(dataDir, 'activity.sqlite');
    const made = performance.now();
    const db = buildActivity(dataDir, file, COMMITS, ID);
    console.log(`${COMMITS} commits made in ${round((performance.now() - made) / 1000, 1)} s`);
    const rows = rowsOf(db);
    // Page 50's cursor, and that both listings agree on it.
    let before: string | undefined;
    for (let p = 1; p < 50; p++) before = (await activityPage(dataDir, ID, rows, { limit: 50, ...(before ? { before } : {}) })).next;
    const fig: Record<string, number[]> = { oldFirst: [], oldPage50: [], keptCold: [], keptAfterCall: [], keptPage50: [], keptCpu: [], oldCpu: [] };
    let n = COMMITS;
    for (let r = 0; r < ROUNDS; r++) {
      const old1 = await timed(() => wholeHistoryPage(dataDir, ID, rows, { limit: 50 }));
      const old50 = await timed(() => wholeHistoryPage(dataDir, ID, rows, { limit: 50, before: before! }));
      const cache = new ActivityCache();
      const cold = await timed(() => activityPage(dataDir, ID, rows, { limit: 50 }, Date.now(), cache));
      // One more call, as a tenant paging its activity while its agents write.
      db.prepare('INSERT INTO t (v) VALUES (?)').run('one more');
      recordCallActivity(db, { tool: 'DATA_WRITE_SQL', by: 'agent:bench', callId: `c${n++}`, statement: 'one more' }, 1);
      capture(db, file, { source: localSource(dataDir, ID), checkpointBytes: 4 * MB });
      const after = await timed(() => activityPage(dataDir, ID, rows, { limit: 50 }, Date.now(), cache));
      const p50 = await timed(() => activityPage(dataDir, ID, rows, { limit: 50, before: before! }, Date.now(), cache));
      const want: ActivityPage = await wholeHistoryPage(dataDir, ID, rows, { limit: 50, before: before! });
      if (JSON.stringify(want) !== JSON.stringify(p50.out)) throw new Error('the kept page 50 differs from the whole-history one');
      fig.oldFirst!.push(old1.ms);
      fig.oldPage50!.push(old50.ms);
      fig.oldCpu!.push(old50.cpuMs);
      fig.keptCold!.push(cold.ms);
      fig.keptAfterCall!.push(after.ms);
      fig.keptPage50!.push(p50.ms);
      fig.keptCpu!.push(p50.cpuMs);
    }
    const m = Object.fromEntries(Object.entries(fig).map(([k, v]) => [k, round(median(v))]));
    console.log(`page of 50 at ${COMMITS} commits, median of ${ROUNDS}, ms: ${JSON.stringify(m)}`);
    console.log(
      `ratios against the whole-history page: ${JSON.stringify({
        keptColdVsOld: round(m.keptCold! / m.oldFirst!, 3),
        keptAfterCallVsOld: round(m.keptAfterCall! / m.oldFirst!, 3),
        keptPage50VsOld: round(m.keptPage50! / m.oldPage50!, 3),
      })}`,
    );
    db.close();
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * The same database served: pages through the queue, the shard worker (in this process, so its
 * thread is this one: the event loop's longest stall during a page is what other databases of
 * the worker wait) and the executor child reading the rows.
 */
async function served(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-activity-served-'));
  const prefix = `ba-${randomUUID().slice(0, 8)}`;
  const id = 'bench/activity';
  const file = databasePath(dataDir, 'bench', 'activity', shardOf(id, 4));
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const made = buildActivity(dataDir, file, COMMITS, id);
  made.close();
  // A history quota past the bench's (200,000 commits take 2 GB of history).
  const config = loadConfig({
    REDIS_URL,
    AGENTDB_DATA_DIR: dataDir,
    AGENTDB_PREFIX: prefix,
    SHARD_COUNT: '4',
    LOG_LEVEL: 'silent',
    HISTORY_MAX_BYTES_PER_DB: String(64 * 1024 ** 3),
  });
  const pool = new ShardWorkerPool({ config, shards: [0, 1, 2, 3], logger: pino({ level: 'silent' }) });
  await pool.start();
  const ops = new ShardOpClient({ redisUrl: REDIS_URL, prefix });
  const history = new HistoryClient(ops, 4);
  const client = new AgentDbClient({ redisUrl: REDIS_URL, prefix, shardCount: 4, maxCallBytes: config.maxCallBytes, rateLimits: false });
  const loop = monitorEventLoopDelay({ resolution: 1 });
  const page = async (before?: string) => {
    loop.reset();
    loop.enable();
    const t = performance.now();
    const out = await history.activity(id, { limit: 50, ...(before ? { before } : {}) }, 'operator');
    const ms = performance.now() - t;
    loop.disable();
    return { ms: round(ms), stallMs: round(loop.max / 1e6), out };
  };
  try {
    const cold = await page();
    console.log(`served, first page cold at ${COMMITS} commits: ${JSON.stringify({ ms: cold.ms, stallMs: cold.stallMs })}`);
    // Again, five times (the first after the cold page also pays the cold page's garbage collection).
    const again: { ms: number; stallMs: number }[] = [];
    for (let r = 0; r < 5; r++) again.push(await page());
    const warm = { ms: median(again.map((a) => a.ms)), stallMs: median(again.map((a) => a.stallMs)) };
    let before = cold.out.next;
    for (let p = 2; p < 50; p++) before = (await page(before)).out.next;
    const p50 = await page(before);
    const call = await client.call({
      workspace: 'bench',
      agent: 'activity',
      settings: { database: 'agent' },
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: "INSERT INTO t (v) VALUES ('one more')", scope: 'agent' },
    } as never);
    if (!call.ok) throw new Error(JSON.stringify(call));
    const after = await page();
    const fig = (f: { ms: number; stallMs: number }) => ({ ms: f.ms, stallMs: f.stallMs });
    console.log(
      `served, page of 50 at ${COMMITS} commits (ms; stallMs: the longest event-loop stall of the worker's thread during it): ${JSON.stringify({
        entries: cold.out.entries.length,
        firstCold: fig(cold),
        firstAgainMedianOf5: fig(warm),
        firstAgainEach: again.map((a) => a.ms),
        page50: fig(p50),
        firstAfterCall: fig(after),
      })}`,
    );
  } finally {
    await client.close();
    await ops.close();
    await pool.stop();
    await deleteKeys(prefix);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
if (process.env.ACTIVITY_BENCH_SERVED !== '0') await served();
