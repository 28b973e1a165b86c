// The child's numbered targets (src/executor/target-refs.ts) under faults, against a ledger
// (`npm run build && node --import tsx bench/target-refs-ledger.ts`): a real executor pool (the
// built child) over more databases than a child keeps numbers for (TARGET_SLOTS), each with a
// marker row naming its own id. Concurrent reads and writes name random databases; every write
// stores, beside its key, the marker of the database it actually ran in. Meanwhile: children
// SIGKILLed (the spare takes over), statements killed at their deadline, a workspace's plan
// limits changed (its targets sent whole again), `close` to every child (a restore in place),
// `evict` of a shard (lease lost), and the pool itself dropped with its children SIGKILLed and a
// new one started (a worker's SIGKILL and restart). At the end every database is read whole.
// BENCH_SECONDS (default 240), BENCH_DATABASES (default 1600), BENCH_CONCURRENCY (default 48),
// BENCH_RESET_EVERY (default 40).
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { databasePath, shardOf } from '../src/contracts/database-id.ts';
import { ExecutorPool } from '../src/executor/executor-pool.ts';
import type { DbTarget, ExecOutcome, ExecRequest } from '../src/executor/executor-protocol.ts';
import { SentTargets, TARGET_SLOTS } from '../src/executor/target-refs.ts';
import { PLAN_LIMITS, type PlanLimits } from '../src/policy/plan-limits.ts';
import { builtExecutorChild } from '../test/helpers/built-child.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 240);
const DATABASES = Number(process.env.BENCH_DATABASES ?? 1600);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 48);
const WORKSPACES = 8;
/** Faults (one a second) between two that replace a child: BENCH_RESET_EVERY, default 40. */
const RESET_EVERY = Number(process.env.BENCH_RESET_EVERY ?? 40);
const SHARDS = 16;
const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';

// Counted, not changed: how often a place's numbering wrapped past TARGET_SLOTS, and how many
// targets went whole or as a number.
const counts = { wraps: 0, whole: 0, numbered: 0 };
const message = SentTargets.prototype.message;
SentTargets.prototype.message = function (this: SentTargets, id, req, reopen) {
  if ((this as unknown as { next: number }).next === TARGET_SLOTS) counts.wraps++;
  const m = message.call(this, id, req, reopen);
  if ('db' in m.req) counts[typeof m.req.db === 'number' ? 'numbered' : 'whole']++;
  return m;
};

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-refs-'));
const limits: PlanLimits[] = Array.from({ length: WORKSPACES }, () => PLAN_LIMITS.pro);
interface Db {
  id: string;
  workspace: number;
  path: string;
  shard: number;
  /** Keys whose write answered ok: each must be in this database once, and nowhere else. */
  acked: Set<string>;
  /** Keys whose write answered a failure (a kill, a timeout): here at most once, nowhere else. */
  unsure: Set<string>;
}
const dbs: Db[] = Array.from({ length: DATABASES }, (_, i) => {
  const w = i % WORKSPACES;
  const workspace = `ws${w}`;
  const agent = i < WORKSPACES ? undefined : `a${i}`;
  const id = agent ? `${workspace}/${agent}` : workspace;
  const shard = shardOf(id, SHARDS);
  return { id, workspace: w, path: databasePath(dataDir, workspace, agent, shard), shard, acked: new Set(), unsure: new Set() };
});
const target = (db: Db): DbTarget => ({ id: db.id, path: db.path, shard: db.shard, limits: limits[db.workspace]! });

const newPool = () =>
  new ExecutorPool({
    size: 2,
    workspaceShare: 2,
    dataDir,
    statementTimeoutMs: 1500,
    heapLimitMb: 256,
    handleCacheSize: 16,
    maxResultBytes: 1024 * 1024,
    child: builtExecutorChild,
  });
let pool = newPool();

const tally = {
  reads: 0,
  readOk: 0,
  writes: 0,
  writeOk: 0,
  failed: 0,
  foreign: 0,
  childKills: 0,
  deadlineKills: 0,
  limitChanges: 0,
  closes: 0,
  evicts: 0,
  poolRestarts: 0,
};
const mismatches: string[] = [];
const bad = (what: string) => {
  mismatches.push(what);
  if (mismatches.length <= 20) console.error('MISMATCH', what);
};
const rowsOf = (o: ExecOutcome): unknown[][] => (o as { result: { rows: unknown[][] } }).result.rows;

async function must(req: ExecRequest): Promise<ExecOutcome> {
  const o = await pool.run(req);
  if (!o.ok) throw new Error(`${req.op}: ${o.error.code} ${o.error.detail}`);
  return o;
}

let seq = 0;
async function oneCall(): Promise<void> {
  const db = dbs[Math.floor(Math.random() * dbs.length)]!;
  if (Math.random() < 0.5) {
    tally.reads++;
    const o = await pool.run({ op: 'query', db: target(db), sql: 'SELECT db FROM marker', params: [], maxRows: 10 });
    if (!o.ok) return void tally.failed++;
    tally.readOk++;
    const rows = rowsOf(o);
    if (rows.length !== 1 || rows[0]![0] !== db.id) bad(`read of ${db.id} saw ${JSON.stringify(rows)}`);
    return;
  }
  tally.writes++;
  const key = `${db.id}#${++seq}`;
  // The row names the database it ran in, from that database's own marker.
  const sql = 'INSERT INTO ledger (k, ran_in) SELECT ?, db FROM marker';
  const o = await pool.run({ op: 'write', db: target(db), sql, params: [key], callKey: `refs:${key}` });
  if (o.ok) {
    tally.writeOk++;
    db.acked.add(key);
  } else {
    tally.failed++;
    db.unsure.add(key);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The n-th fault, one a second. Those that replace a child (a SIGKILL, a deadline's kill, the
 * pool's restart) come every RESET_EVERY only: a child must live long enough to be sent more
 * databases than it keeps numbers for, or its numbering never wraps.
 */
async function oneFault(n: number): Promise<void> {
  const db = dbs[Math.floor(Math.random() * dbs.length)]!;
  if (n % RESET_EVERY === RESET_EVERY - 1) {
    const reset = Math.floor(n / RESET_EVERY) % 3;
    if (reset === 0) {
      const pid = pool.pids[Math.floor(Math.random() * pool.pids.length)];
      if (pid) {
        process.kill(pid, 'SIGKILL');
        tally.childKills++;
      }
    } else if (reset === 1) {
      const o = await pool.run({ op: 'query', db: target(db), sql: FOREVER, params: [], maxRows: 1 });
      if (!o.ok && o.error.code === 'STATEMENT_TIMEOUT') tally.deadlineKills++;
    } else {
      // The worker's SIGKILL: its children die with it, a new worker starts another pool.
      const old = pool;
      pool = newPool();
      await pool.start();
      for (const pid of old.pids) process.kill(pid, 'SIGKILL');
      void old.stop();
      tally.poolRestarts++;
    }
    return;
  }
  switch (n % 3) {
    case 0: {
      const w = db.workspace;
      const was = limits[w]!;
      limits[w] = { ...PLAN_LIMITS.pro, maxTables: was.maxTables === 50 ? 51 : 50, maxBytes: was.maxBytes + 4096 * (Math.random() < 0.5 ? 1 : -1) };
      tally.limitChanges++;
      return;
    }
    case 1:
      await must({ op: 'close', path: db.path });
      tally.closes++;
      return;
    default:
      await must({ op: 'evict', shards: [db.shard] });
      tally.evicts++;
  }
}

async function main(): Promise<void> {
  await pool.start();
  const t0 = Date.now();
  for (const db of dbs) mkdirSync(path.dirname(db.path), { recursive: true });
  for (let i = 0; i < dbs.length; i += 64) {
    await Promise.all(
      dbs.slice(i, i + 64).map(async (db) => {
        await must({ op: 'write', db: target(db), sql: 'CREATE TABLE marker (db TEXT NOT NULL)', params: [], callKey: `m1:${db.id}` });
        await must({ op: 'write', db: target(db), sql: 'INSERT INTO marker VALUES (?)', params: [db.id], callKey: `m2:${db.id}` });
        await must({ op: 'write', db: target(db), sql: 'CREATE TABLE ledger (k TEXT PRIMARY KEY, ran_in TEXT)', params: [], callKey: `m3:${db.id}` });
      }),
    );
  }
  console.log(`created ${dbs.length} databases in ${((Date.now() - t0) / 1000).toFixed(1)} s; wraps so far ${counts.wraps}`);

  const end = Date.now() + SECONDS * 1000;
  let faults = 0;
  const faulting = (async () => {
    while (Date.now() < end) {
      await sleep(1000);
      await oneFault(faults++);
    }
  })();
  const callers = Array.from({ length: CONCURRENCY }, async () => {
    while (Date.now() < end) await oneCall();
  });
  const progress = setInterval(
    () => console.log(JSON.stringify({ s: Math.round((Date.now() - t0) / 1000), ...tally, ...counts, mismatches: mismatches.length })),
    15_000,
  );
  await Promise.all([faulting, ...callers]);
  clearInterval(progress);

  // Every database whole: its marker, and each ledger row's key and where it ran.
  const where = new Map<string, string[]>();
  let rowsChecked = 0;
  for (const db of dbs) {
    const marker = rowsOf(await must({ op: 'query', db: target(db), sql: 'SELECT db FROM marker', params: [], maxRows: 10 }));
    if (marker.length !== 1 || marker[0]![0] !== db.id) bad(`marker of ${db.id} is ${JSON.stringify(marker)}`);
    const rows = rowsOf(await must({ op: 'query', db: target(db), sql: 'SELECT k, ran_in FROM ledger', params: [], maxRows: 1_000_000 }));
    for (const [k, ranIn] of rows as [string, string][]) {
      rowsChecked++;
      if (ranIn !== db.id) bad(`${db.id} holds ${k} written while in ${ranIn}`);
      (where.get(k) ?? where.set(k, []).get(k)!).push(db.id);
    }
  }
  let ackedChecked = 0;
  for (const db of dbs) {
    for (const k of db.acked) {
      ackedChecked++;
      const found = where.get(k) ?? [];
      if (found.length !== 1 || found[0] !== db.id) bad(`acked ${k} found in ${JSON.stringify(found)}`);
    }
    for (const k of db.unsure) {
      const found = where.get(k) ?? [];
      if (found.some((id) => id !== db.id) || found.length > 1) bad(`unsure ${k} found in ${JSON.stringify(found)}`);
    }
  }
  for (const [k, found] of where) {
    const owner = k.slice(0, k.lastIndexOf('#'));
    if (found.some((id) => id !== owner)) tally.foreign++;
  }
  await pool.stop();
  console.log(
    JSON.stringify({
      seconds: SECONDS,
      databases: DATABASES,
      concurrency: CONCURRENCY,
      ...tally,
      ...counts,
      rowsChecked,
      ackedChecked,
      mismatches: mismatches.length,
    }),
  );
  rmSync(dataDir, { recursive: true, force: true });
  process.exit(mismatches.length ? 1 : 0);
}

void main();
