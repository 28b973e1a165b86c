// `npm run build && node --import tsx bench/child-read.ts <a/dist> [b/dist]`: the executor
// child's CPU per sequential PK read (issue 31), two builds side by side and the raw child
// (bench/raw-child.ts) beside them, each driven the same way: one request, await its answer,
// next. No Redis and no worker: each build's own ExecutorPool (one child, history on, as the
// worker starts it) is driven from this process, so what moves is the child's own cost and the
// pool's round trip. Rounds alternate A B raw, raw B A …; medians of the rounds are compared.
// ROUNDS (default 8), CALLS (default 3000). CPU: the scheduler's nanoseconds (`cpuSecondsFine`). CPU_PROF=<dir>: the children write V8 CPU profiles
// there (--cpu-prof) when they exit. KIND=insert: bench/small-insert.ts's write instead (one new
// row per call, history on, its commit's activity row as the worker sends it; no raw side), call
// ids counting up, or with IDS=uuid random ones, as clients send them.
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cpuSecondsFine as cpuSeconds } from './cpu.ts';
import { median, quantile, round } from './stats.ts';

const ROUNDS = Number(process.env.ROUNDS ?? 8);
const CALLS = Number(process.env.CALLS ?? 3000);
const INSERT = process.env.KIND === 'insert';
const PROF = process.env.CPU_PROF ? path.resolve(process.env.CPU_PROF) : undefined;
const dists = [process.argv[2], process.argv[3] ?? fileURLToPath(new URL('../dist', import.meta.url))].map((d) => {
  if (!d) throw new Error('usage: child-read.ts <a/dist> [b/dist]');
  return path.resolve(d);
});

interface Side {
  name: string;
  pid: () => number;
  read: (i: number) => Promise<void>;
  stop: () => Promise<void>;
  cpu: number[];
  wall: number[];
  p50: number[];
}

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-child-read-'));
// PROF_INTERVAL (µs, default V8's 1000) samples finer.
const interval = process.env.PROF_INTERVAL ? [`--cpu-prof-interval=${Number(process.env.PROF_INTERVAL)}`] : [];
const profArgs = (name: string) => (PROF ? ['--cpu-prof', `--cpu-prof-dir=${path.join(PROF, name)}`, ...interval] : []);

async function agentSide(name: string, dist: string): Promise<Side> {
  const { ExecutorPool } = await import(pathToFileURL(path.join(dist, 'src/executor/executor-pool.js')).href);
  const { PLAN_LIMITS } = await import(pathToFileURL(path.join(dist, 'src/policy/plan-limits.js')).href);
  const dir = path.join(dataDir, name);
  const pool = new ExecutorPool({
    size: 1,
    workspaceShare: 1,
    dataDir: dir,
    statementTimeoutMs: 30_000,
    heapLimitMb: 256,
    handleCacheSize: 64,
    maxResultBytes: 1024 * 1024,
    history: { checkpointBytes: 4 * 1024 * 1024, retentionDays: 30 },
    child: { file: path.join(dist, 'src/executor/executor-child.js'), execArgv: profArgs(name) },
  });
  await pool.start();
  const db = { id: 'bench/reader', path: path.join(dir, 'shards', '0', 'bench', 'reader.sqlite'), shard: 0, limits: PLAN_LIMITS.enterprise };
  fs.mkdirSync(path.dirname(db.path), { recursive: true });
  const must = async (p: Promise<{ ok: boolean }>) => {
    const o = await p;
    if (!o.ok) throw new Error(`${name}: ${JSON.stringify(o)}`);
  };
  await must(pool.run({ op: 'write', db, sql: 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)', params: [], callKey: 'k1' }));
  const ids = JSON.stringify(Array.from({ length: 1000 }, (_, i) => i));
  await must(pool.run({ op: 'write', db, sql: "INSERT INTO kv SELECT value, 'value-' || value FROM json_each(?)", params: [ids], callKey: 'k2' }));
  await must(pool.run({ op: 'write', db, sql: 'CREATE TABLE log (id INTEGER PRIMARY KEY, v TEXT)', params: [], callKey: 'k3' }));
  let n = 0;
  // As the worker sends bench/small-insert.ts's call (`execRequest`): a call key, and the commit's activity row.
  const insert = () => {
    const callId = process.env.IDS === 'uuid' ? randomUUID() : `call-${n}`;
    n++;
    const sql = 'INSERT INTO log (v) VALUES (?)';
    const activity = { tool: 'DATA_WRITE_SQL', by: 'agent:reader', callId, statement: sql };
    return must(pool.run({ op: 'write', db, sql, params: [`row ${n}`], callKey: `bench:reader:${callId}`, callId, activity }));
  };
  return {
    name,
    pid: () => pool.pids[0],
    read: INSERT
      ? insert
      : (i) => must(pool.run({ op: 'query', db, sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000], maxRows: 1000, callId: `call-${i}` })),
    stop: () => pool.stop(),
    cpu: [],
    wall: [],
    p50: [],
  };
}

async function rawSide(): Promise<Side> {
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  const child = fork(fileURLToPath(new URL('./raw-child.ts', import.meta.url)), [path.join(dataDir, 'raw.db')], {
    execArgv: ['--import', tsx, ...profArgs('raw')],
    serialization: 'json',
  });
  await new Promise((resolve) => child.once('message', resolve));
  const waiting = new Map<number, () => void>();
  child.on('message', (m: { id: number }) => {
    waiting.get(m.id)?.();
    waiting.delete(m.id);
  });
  let next = 0;
  return {
    name: 'raw',
    pid: () => child.pid!,
    read: (i) =>
      new Promise<void>((resolve) => {
        const id = next++;
        waiting.set(id, resolve);
        child.send({ id, key: i % 1000 });
      }),
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.disconnect();
      }),
    cpu: [],
    wall: [],
    p50: [],
  };
}

const sides: Side[] = [];
try {
  sides.push(await agentSide('A', dists[0]!), await agentSide('B', dists[1]!));
  if (!INSERT) sides.push(await rawSide());
  for (const s of sides) for (let i = 0; i < 1000; i++) await s.read(i);
  for (let r = 0; r < ROUNDS; r++) {
    for (const s of r % 2 === 0 ? sides : [...sides].reverse()) {
      const pid = s.pid();
      const before = cpuSeconds(pid);
      const lat: number[] = [];
      const t0 = performance.now();
      for (let i = 0; i < CALLS; i++) {
        const t = performance.now();
        await s.read(i);
        lat.push(performance.now() - t);
      }
      s.wall.push((performance.now() - t0) / CALLS);
      s.cpu.push(((cpuSeconds(pid) - before) * 1000) / CALLS);
      s.p50.push(
        quantile(
          lat.sort((a, b) => a - b),
          0.5,
        ),
      );
    }
  }
  const med = median;
  for (const s of sides) {
    console.log(
      JSON.stringify({
        side: s.name,
        childMsPerRead: round(med(s.cpu), 4),
        msPerRead: round(med(s.wall), 3),
        p50Ms: round(med(s.p50), 3),
        cpuRounds: s.cpu.map((c) => round(c, 4)),
      }),
    );
  }
  const [a, b] = sides;
  const ratio = (f: (s: Side) => number[]) => round(med(f(a!).map((x, i) => f(b!)[i]! / x)), 3);
  const pairs = a!.cpu.map((x, i) => b!.cpu[i]! / x);
  console.log(
    JSON.stringify({
      childCpuBoverA: ratio((s) => s.cpu),
      childPairsBLower: pairs.filter((p) => p < 1).length,
      childPairsBHigher: pairs.filter((p) => p > 1).length,
      p50BoverA: ratio((s) => s.p50),
    }),
  );
} finally {
  for (const s of sides) await s.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
}
