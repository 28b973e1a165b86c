// `npm run bench:history`: what point-in-time history costs, as ratios against baselines
// measured in the same run (issue 11, "Speed"):
//   - write throughput with capture on against capture off, end to end (client → BullMQ →
//     worker → executor child), 64 calls in flight (goal: at most 15 % slower);
//   - snapshot and restore MB/s of a 100 MB database against a plain copy of its file
//     (goal: restore at least 0.5× copy): the rebuild alone, and the whole restore in place as
//     the executor child runs it (back over the last 10 commits, and back before the live
//     generation; with where its time goes), and a restore into a new database (of the halved state, and of the whole one);
//     each restore that rewrites the file (far back, forks) also against the copy fsynced, for context;
//   - restore time of a database with a day of history (10,000 writes in one generation).
// HISTORY_BENCH_SOAK=N also runs the randomized history test with N steps (the larger soak).
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { loadConfig } from '../src/config.ts';
import { capture } from '../src/history/capture.ts';
import { localSource } from '../src/history/history-files.ts';
import { planRestore } from '../src/history/restore-plan.ts';
import { buildRestore } from '../src/history/restore-rebuild.ts';
import { startGeneration } from '../src/history/snapshot.ts';
import { AgentDbClient } from '../src/calls/client.ts';
import { ShardWorkerPool } from '../src/shards/shard-worker-pool.ts';
import { databasePath } from '../src/contracts/database-id.ts';
import type { DbTarget } from '../src/executor/executor-protocol.ts';
import { HandleCache } from '../src/sqlite/handle-cache.ts';
import { HistoryCapture } from '../src/history/handle-capture.ts';
import { restoreInPlace } from '../src/history/restore-requests.ts';
import { restoreInto } from '../src/history/restore-into.ts';
import { snapshotNow } from '../src/history/snapshot-now.ts';
import { PLAN_LIMITS } from '../src/policy/plan-limits.ts';
import { deleteKeys } from '../test/helpers/harness.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const WRITES = Number(process.env.HISTORY_BENCH_WRITES ?? 3000);
const ROUNDS = Number(process.env.HISTORY_BENCH_ROUNDS ?? 3);
const DB_MB = Number(process.env.HISTORY_BENCH_DB_MB ?? 100);
const DAY_WRITES = Number(process.env.HISTORY_BENCH_DAY_WRITES ?? 10_000);
const IN_FLIGHT = 64;
const MB = 1024 * 1024;

const round = (x: number, d = 3) => Math.round(x * 10 ** d) / 10 ** d;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Calls per second of `WRITES` inserts over 8 agents' databases, with capture on or off. */
async function writeThroughput(capture: 'on' | 'off'): Promise<number> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-history-'));
  const prefix = `bh-${randomUUID().slice(0, 8)}`;
  const config = loadConfig({ REDIS_URL, AGENTDB_DATA_DIR: dataDir, AGENTDB_PREFIX: prefix, SHARD_COUNT: '4', LOG_LEVEL: 'silent', HISTORY_CAPTURE: capture });
  const pool = new ShardWorkerPool({ config, shards: [0, 1, 2, 3], logger: pino({ level: 'silent' }) });
  await pool.start();
  const client = new AgentDbClient({ redisUrl: REDIS_URL, prefix, shardCount: 4, maxCallBytes: config.maxCallBytes, rateLimits: false });
  const settings = { database: 'agent' as const };
  try {
    for (let a = 0; a < 8; a++) {
      const made = await client.call({
        workspace: 'bench',
        agent: `a${a}`,
        settings,
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, n REAL)' },
      });
      if (!made.ok) throw new Error(JSON.stringify(made));
    }
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        for (let i = next++; i < WRITES; i = next++) {
          const out = await client.call({
            workspace: 'bench',
            agent: `a${i % 8}`,
            settings,
            tool: 'DATA_WRITE_SQL',
            arguments: { sql: 'INSERT INTO t (v, n) VALUES (?, random())', params: [`row ${i} ${'x'.repeat(100)}`] },
          });
          if (!out.ok) throw new Error(JSON.stringify(out));
        }
      }),
    );
    return WRITES / ((performance.now() - t0) / 1000);
  } finally {
    await client.close();
    await pool.stop();
    await deleteKeys(prefix);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/** A database of about `mb` MB with its history begun, and what copying, snapshotting and restoring it take. */
function bigDatabase(mb: number) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-big-'));
  const file = path.join(dataDir, 'big.sqlite');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  const source = localSource(dataDir, 'bench/big');
  capture(db, file, { source, checkpointBytes: 64 * MB });
  db.exec('CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB)');
  const insert = db.prepare('INSERT INTO blobs (b) VALUES (randomblob(?))');
  for (let i = 0; i < mb * 4; i++) {
    insert.run(256 * 1024);
    capture(db, file, { source, checkpointBytes: 64 * MB });
  }
  db.pragma('wal_checkpoint(TRUNCATE)');
  const bytes = fs.statSync(file).size;

  const copyTo = path.join(dataDir, 'copy.sqlite');
  let t = performance.now();
  fs.copyFileSync(file, copyTo);
  const copyS = (performance.now() - t) / 1000;
  fs.rmSync(copyTo);

  t = performance.now();
  startGeneration(db, file, source, 'manual', Date.now());
  const snapshotS = (performance.now() - t) / 1000;
  // A few commits on top, so the restore applies frames as well as the snapshot.
  for (let i = 0; i < 10; i++) {
    insert.run(4096);
    capture(db, file, { source, checkpointBytes: 64 * MB });
  }
  const at = Date.now();
  const out = path.join(dataDir, 'restored.sqlite');
  t = performance.now();
  const plan = planRestore(source, { at });
  buildRestore(plan, out);
  const restoreS = (performance.now() - t) / 1000;
  db.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
  return {
    mb: round(bytes / MB, 1),
    copyMBps: round(bytes / MB / copyS, 1),
    snapshotMBps: round(bytes / MB / snapshotS, 1),
    restoreMBps: round(bytes / MB / restoreS, 1),
    restoreFrames: plan.frames,
  };
}

/**
 * The in-place restore of a `mb` MB database end to end, as the executor child runs it for
 * `agentdb restore DB --at T` (`restoreInPlace`), on a handle cache with capture hooks like the
 * child's: back over the last ten commits (the undo of an agent's last writes: within the live
 * generation, one commit of the pages changed since), timed whole and then again step by step
 * (its step hook) to say where the time goes; back to the middle of the fill, before the
 * generation began (the rebuilt file copied in and renamed over the live one, a new
 * generation); and a `restoreInto` fork of it into a new database.
 */
function inPlaceRestore(mb: number) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-inplace-'));
  const history = new HistoryCapture(dataDir, { checkpointBytes: 64 * MB, retentionDays: 30 });
  const handles = new HandleCache({ size: 16, ...history.hooks() });
  const target = (agent: string): DbTarget => ({
    id: `bench/${agent}`,
    path: databasePath(dataDir, 'bench', agent, 0),
    shard: 0,
    limits: PLAN_LIMITS.enterprise,
  });
  const db = target('big');
  const by = { who: 'bench', via: 'operator' as const };
  // Commit times are milliseconds: a moment taken here is before every later commit.
  const moment = () => {
    const at = Date.now();
    while (Date.now() <= at);
    return at;
  };
  try {
    const live = handles.open(db, 'write');
    live.exec('CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB)');
    history.run(live, db);
    const insert = live.prepare('INSERT INTO blobs (b) VALUES (randomblob(?))');
    let middle = 0;
    for (let i = 0; i < mb * 4; i++) {
      insert.run(256 * 1024);
      history.run(live, db);
      if (i === mb * 2) middle = moment();
    }
    snapshotNow(handles, history, dataDir, { op: 'snapshot', db, reason: 'manual' });
    const bytes = fs.statSync(db.path).size;
    // The baselines, three times each (the median): a plain copy of the file, and the same copy
    // fsynced (what a restore must be before it answers), for context.
    const copyTo = path.join(dataDir, 'copy.sqlite');
    const copies: number[] = [];
    const durableCopies: number[] = [];
    let t = 0;
    for (let r = 0; r < 3; r++) {
      t = performance.now();
      fs.copyFileSync(db.path, copyTo);
      copies.push((performance.now() - t) / 1000);
      const fd = fs.openSync(copyTo, 'r+');
      fs.fsyncSync(fd);
      fs.closeSync(fd);
      durableCopies.push((performance.now() - t) / 1000);
      fs.rmSync(copyTo);
    }
    const copyS = median(copies);
    const durableCopyS = median(durableCopies);
    const tenCommits = () => {
      const at = moment();
      const h = handles.open(db, 'write');
      for (let i = 0; i < 10; i++) {
        h.prepare('INSERT INTO blobs (b) VALUES (randomblob(?))').run(4096);
        history.run(h, db);
      }
      return at;
    };
    // Three times (the median: the first also warms the code and the page cache).
    const times: number[] = [];
    for (let r = 0; r < 3; r++) {
      const at = tenCommits();
      t = performance.now();
      const res = restoreInPlace(handles, history, dataDir, { op: 'restore', db, at, by });
      times.push((performance.now() - t) / 1000);
      if (!res.undoId) throw new Error(`restore kept no undo point: ${JSON.stringify(res)}`);
    }
    const inPlaceS = median(times);

    // Again, timed step by step (the restore's own step hook): where the time goes.
    const at = tenCommits();
    const steps: Record<string, number> = {};
    let last = performance.now();
    const hooks = {
      step(name: string) {
        const now = performance.now();
        steps[name] = round((now - last) / 1000);
        last = now;
      },
    };
    last = performance.now();
    restoreInPlace(handles, history, dataDir, { op: 'restore', db, at, by }, hooks);
    steps.total = round(Object.values(steps).reduce((a, b) => a + b, 0));

    const full = moment();
    t = performance.now();
    restoreInPlace(handles, history, dataDir, { op: 'restore', db, at: middle, by });
    const farBackS = (performance.now() - t) / 1000;

    // Forks, three of each (the median): of the halved state, and of the whole 100 MB one
    // (before the restore above halved it).
    const forks = (at: number, name: string) =>
      median(
        [0, 1, 2].map((r) => {
          t = performance.now();
          restoreInto(handles, history, dataDir, { op: 'restoreInto', db: target(`${name}-${r}`), source: db.id, at, by });
          return (performance.now() - t) / 1000;
        }),
      );
    const intoS = forks(Date.now(), 'fork');
    const intoFullS = forks(full, 'fork-full');
    const m = bytes / MB;
    const copyMBps = m / copyS;
    return {
      mb: round(m, 1),
      copyMBps: round(copyMBps, 1),
      inPlaceMBps: round(m / inPlaceS, 1),
      inPlaceVsCopy: round(m / inPlaceS / copyMBps),
      farBackMBps: round(m / farBackS, 1),
      farBackVsCopy: round(m / farBackS / copyMBps),
      intoMBps: round(m / intoS, 1),
      intoVsCopy: round(m / intoS / copyMBps),
      intoFullVsCopy: round(m / intoFullS / copyMBps),
      durableCopyMBps: round(m / durableCopyS, 1),
      vsDurableCopy: { farBack: round(durableCopyS / farBackS), into: round(durableCopyS / intoS), intoFull: round(durableCopyS / intoFullS) },
      inPlaceS: round(inPlaceS),
      inPlaceRunsS: times.map((x) => round(x)),
      farBackS: round(farBackS),
      steps,
    };
  } finally {
    handles.closeAll();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Restore time of a database after `writes` commits in one generation (a day of an agent's writes). */
function dayOfHistory(writes: number) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-day-'));
  const file = path.join(dataDir, 'day.sqlite');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  const source = localSource(dataDir, 'bench/day');
  const opts = { source, checkpointBytes: 4 * MB };
  capture(db, file, opts);
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, n REAL)');
  const insert = db.prepare('INSERT INTO t (v, n) VALUES (?, random())');
  const update = db.prepare('UPDATE t SET n = random() WHERE id = ?');
  for (let i = 0; i < writes; i++) {
    if (i % 3 === 2) update.run(1 + Math.floor(Math.random() * i));
    else insert.run(`row ${i} ${'x'.repeat(100)}`);
    capture(db, file, opts);
  }
  db.close();
  const out = path.join(dataDir, 'restored.sqlite');
  const t = performance.now();
  const plan = planRestore(source, { at: Date.now() });
  buildRestore(plan, out);
  const restoreS = (performance.now() - t) / 1000;
  fs.rmSync(dataDir, { recursive: true, force: true });
  return { writes, commits: plan.commits, frames: plan.frames, restoreS: round(restoreS) };
}

async function main(): Promise<void> {
  const off: number[] = [];
  const on: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    // Alternated, so a machine that slows down during the run penalises neither side.
    off.push(await writeThroughput('off'));
    on.push(await writeThroughput('on'));
  }
  const writes = { callsPerSecOff: round(median(off), 1), callsPerSecOn: round(median(on), 1), ratio: round(median(on) / median(off)) };
  console.log(`write throughput, capture on / off: ${JSON.stringify(writes)} (goal: ratio >= 0.85)`);
  const big = bigDatabase(DB_MB);
  const bigRatios = { snapshotVsCopy: round(big.snapshotMBps / big.copyMBps), restoreVsCopy: round(big.restoreMBps / big.copyMBps) };
  console.log(`${big.mb} MB database: ${JSON.stringify(big)} ratios ${JSON.stringify(bigRatios)} (goal: restore >= 0.5× copy)`);
  const inPlace = inPlaceRestore(DB_MB);
  const { steps, ...inPlaceFigures } = inPlace;
  console.log(
    `${inPlace.mb} MB database, restore in place end to end (restoreInPlace: back over its last 10 commits, and back to the middle of its fill, before its generation) and into a new database (restoreInto): ${JSON.stringify(inPlaceFigures)} (goal: in place >= 0.5× copy)`,
  );
  console.log(`  in-place steps, seconds: ${JSON.stringify(steps)}`);
  const day = dayOfHistory(DAY_WRITES);
  console.log(`a day of history: ${JSON.stringify(day)}`);
  const results = {
    at: new Date().toISOString(),
    host: { cpus: os.availableParallelism(), node: process.version },
    writes,
    big: { ...big, ratios: bigRatios },
    inPlace,
    day,
  };
  const dir = new URL('./results/', import.meta.url);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(new URL(`history-${results.at.replace(/[:.]/g, '-')}.json`, dir), `${JSON.stringify(results, null, 2)}\n`);

  const soak = Number(process.env.HISTORY_BENCH_SOAK ?? 0);
  if (soak > 0) {
    const root = fileURLToPath(new URL('..', import.meta.url));
    const run = spawnSync('npx', ['vitest', 'run', 'test/integration/history-randomized.test.ts'], {
      cwd: root,
      stdio: 'inherit',
      env: { ...process.env, HISTORY_TEST_STEPS: String(soak) },
    });
    if (run.status !== 0) process.exitCode = 1;
  }
}

await main();
