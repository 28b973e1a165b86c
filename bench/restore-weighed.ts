// What a restore costs end to end (HistoryClient → shard op → worker → executor child) on a
// database with some history, for an A/B of two builds' workers on one site (session 29, L3: the
// restore ran its plan twice, once for the quota's weighing and again itself):
//   WORKER_A=<a build's bin/agentdb.js> WORKER_B=<another's> node --import tsx bench/restore-weighed.ts
// Defaults: A main's build at the session's start (.ab-base), B this checkout's dist. Rounds in the
// order A B B A A B … (ROUNDS, default 6), each a worker of its own on the same data, REPEATS
// (default 4) times: a restore in place to the middle of the history, its undo, a fork of that moment.
// Reports each kind's median ms, CPU ms of the worker and its executor children a restore, and
// the children's read syscalls a restore (a count: history's indexes are read by each plan).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { HistoryClient } from '../src/shards/history-client.ts';
import { ShardOpClient } from '../src/shards/shard-op-client.ts';
import { benchSite } from './agentdb-worker.ts';
import { childPids, cpuSeconds, syscalls } from './cpu.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const here = path.dirname(fileURLToPath(import.meta.url));
const BINS = {
  A: process.env.WORKER_A ?? path.resolve(here, '../../../main/.ab-base/dist/bin/agentdb.js'),
  B: process.env.WORKER_B ?? path.resolve(here, '../dist/bin/agentdb.js'),
};
const WRITES = Number(process.env.WRITES ?? 2000);
const ROUNDS = Number(process.env.ROUNDS ?? 6);
const REPEATS = Number(process.env.REPEATS ?? 4);
const by = { who: 'operator:bench', via: 'operator' as const };
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const site = benchSite(REDIS_URL, 'restore-weighed', { LOG_LEVEL: 'silent' });
const ops = new ShardOpClient({ redisUrl: REDIS_URL, prefix: site.config.prefix });
const history = new HistoryClient(ops, site.config.shardCount);
const call = (sql: string, params: unknown[] = []) =>
  site.client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql, params } });

type Kind = 'inPlace' | 'undo' | 'fork';
const ms: Record<'A' | 'B', Record<Kind, number[]>> = { A: { inPlace: [], undo: [], fork: [] }, B: { inPlace: [], undo: [], fork: [] } };
const cpu: Record<'A' | 'B', number[]> = { A: [], B: [] };
// Read syscalls of the executor children a restore (reads of history's files and the database).
const reads: Record<'A' | 'B', number[]> = { A: [], B: [] };
try {
  let middle = 0;
  {
    const w = await site.worker({}, BINS.A);
    await call('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)');
    for (let i = 0; i < WRITES; i++) {
      const env = await call('INSERT INTO notes (body) VALUES (?)', [`note ${i} `.padEnd(200, 'x')]);
      if (!env.ok) throw new Error(JSON.stringify(env));
      if (i === WRITES / 2) middle = Date.now();
    }
    await w.stop();
  }
  const order = Array.from({ length: ROUNDS }, (_, i) => ((i + 1) % 4 < 2 ? 'A' : 'B') as 'A' | 'B');
  let forks = 0;
  for (const side of order) {
    const w = await site.worker({}, BINS[side]);
    const pids = () => [w.pid, ...childPids(w.pid)];
    // One restore first, not counted: the children open the database and read its history cold.
    const warm = await history.restore('acme/scout', { at: new Date(middle).toISOString(), by }, 'operator');
    await history.restore('acme/scout', { undo: warm.undoId!, by }, 'operator');
    const cpuBefore = pids().reduce((s, p) => s + cpuSeconds(p), 0);
    const readsOf = () => childPids(w.pid).reduce((s, p) => s + syscalls(p).reads, 0);
    const readsBefore = readsOf();
    for (let r = 0; r < REPEATS; r++) {
      const timed = async (kind: Kind, run: () => Promise<{ undoId?: string }>) => {
        const t = performance.now();
        const out = await run();
        ms[side][kind].push(performance.now() - t);
        return out;
      };
      const done = await timed('inPlace', () => history.restore('acme/scout', { at: new Date(middle).toISOString(), by }, 'operator'));
      await timed('undo', () => history.restore('acme/scout', { undo: done.undoId!, by }, 'operator'));
      await timed('fork', () => history.restore('acme/scout', { at: new Date(middle).toISOString(), into: `acme/f${++forks}`, by }, 'operator'));
    }
    cpu[side].push((pids().reduce((s, p) => s + cpuSeconds(p), 0) - cpuBefore) / (3 * REPEATS));
    reads[side].push((readsOf() - readsBefore) / (3 * REPEATS));
    await w.stop();
  }
  const row = (side: 'A' | 'B') =>
    `| ${side} | ${(['inPlace', 'undo', 'fork'] as const).map((k) => median(ms[side][k]).toFixed(1)).join(' | ')} | ${(median(cpu[side]) * 1000).toFixed(1)} | ${median(reads[side]).toFixed(0)} |`;
  console.log(
    `writes ${WRITES}, rounds ${order.join('')}, ${REPEATS} of each a round\n| worker | in place ms | undo ms | fork ms | CPU ms a restore (worker + children) | children's read syscalls a restore |`,
  );
  console.log(row('A'));
  console.log(row('B'));
} finally {
  await ops.close();
  await site.close();
}
