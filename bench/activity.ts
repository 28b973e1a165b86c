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
import Database from 'better-sqlite3';
import { capture } from '../src/history/capture.ts';
import { localSource } from '../src/history/history-files.ts';
import { ActivityCache } from '../src/history/activity-cache.ts';
import type { ActivityRows } from '../src/history/activity-history.ts';
import { activityPage, type ActivityPage } from '../src/history/activity-view.ts';
import { activitySince, readActivity, recordCallActivity, type ActivityRow } from '../src/sqlite/sqlite-activity.ts';
import { wholeHistoryPage } from '../test/helpers/activity-oracle.ts';

const COMMITS = Number(process.env.ACTIVITY_BENCH_COMMITS ?? 40_000);
const ROUNDS = Number(process.env.ACTIVITY_BENCH_ROUNDS ?? 5);
const MB = 1024 * 1024;
const ID = 'bench/activity';

const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** A database of `commits` calls, each its activity row in its commit, captured as the executor captures. */
function build(dataDir: string, file: string, commits: number): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  const opts = { source: localSource(dataDir, ID), checkpointBytes: 4 * MB };
  capture(db, file, opts);
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
  const call = db.transaction((i: number) => {
    insert.run(`row ${i}`);
    recordCallActivity(db, { tool: 'DATA_WRITE_SQL', by: 'agent:bench', callId: `c${i}`, statement: 'INSERT INTO t (v) VALUES (?)' }, 1);
  });
  for (let i = 0; i < commits; i++) {
    call(i);
    capture(db, file, opts);
  }
  return db;
}

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
    const db = build(dataDir, file, COMMITS);
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

await main();
