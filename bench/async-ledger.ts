// `npm run build && node --import tsx bench/async-ledger.ts`: what one sequential PK read makes
// each process do besides its work, ours against the floor (raw BullMQ whose worker asks a
// forked child, `bench/raw-child-worker.ts`): the async resources (timers, immediates, ticks,
// promises, socket reads) each process creates per read. It runs itself again with
// `bench/async-ledger-hook.mjs` loaded in every process (NODE_OPTIONS), which counts them and
// writes its counts on SIGUSR2; the run signals every process before and after CALLS reads and
// prints the differences per read. STACKS=1: timers, immediates and ticks by where they were
// made. WORKER_BIN as query-only.ts. CONC: reads in flight (default 1).
import { readFileSync, rmSync, existsSync } from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import os from 'node:os';
import path from 'node:path';
import { mkdtempSync } from 'node:fs';
import { Redis } from 'ioredis';
import { benchSite } from './agentdb-worker.ts';
import { childPids } from './cpu.ts';
import { pkReadTable } from './pk-read.ts';
import { rawBullmq } from './raw-bullmq.ts';
import { drive, round } from './stats.ts';
import { freePort } from '../test/helpers/own-redis.ts';

const CALLS = Number(process.env.CALLS ?? 2000);
const CONC = Number(process.env.CONC ?? 1);
if (!process.env.ASYNC_LEDGER_DIR) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-async-ledger-'));
  const hook = fileURLToPath(new URL('./async-ledger-hook.mjs', import.meta.url));
  const env = { ...process.env, ASYNC_LEDGER_DIR: dir, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${hook}` };
  const { status } = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url)], { env, stdio: 'inherit' });
  rmSync(dir, { recursive: true, force: true });
  process.exit(status ?? 1);
}
const DIR = process.env.ASYNC_LEDGER_DIR;

const port = await freePort();
const redisDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-async-'));
const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', redisDir, '--save', '', '--appendonly', 'no'], {
  stdio: 'ignore',
});
const url = `redis://127.0.0.1:${port}`;
const admin = new Redis(url, { retryStrategy: () => 50 });
admin.on('error', () => undefined);
await admin.ping();
const site = benchSite(url, 'async', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent', REDIS_BYTES_PER_WORKSPACE: String(2 ** 40) });
const worker = await site.worker({}, process.env.WORKER_BIN);
const floor = await rawBullmq(url, `${site.config.prefix}-rawc`, 32, true, {
  file: './raw-child-worker.ts',
  args: [path.join(site.config.dataDir, 'raw-child.db')],
});

type Counts = Record<string, number>;
const snap = async (pids: number[]): Promise<Map<number, Counts>> => {
  for (const pid of pids) if (existsSync(`${DIR}/${pid}.jsonl`)) rmSync(`${DIR}/${pid}.jsonl`);
  for (const pid of pids) process.kill(pid, 'SIGUSR2');
  const out = new Map<number, Counts>();
  for (let t = 0; t < 200 && out.size < pids.length; t++) {
    await new Promise((r) => setTimeout(r, 10));
    for (const pid of pids) {
      if (out.has(pid) || !existsSync(`${DIR}/${pid}.jsonl`)) continue;
      const line = readFileSync(`${DIR}/${pid}.jsonl`, 'utf8').trim();
      if (line) {
        const d = JSON.parse(line) as { counts: Counts; stacks: Counts };
        out.set(pid, { ...d.counts, ...Object.fromEntries(Object.entries(d.stacks).map(([k, v]) => [`@ ${k}`, v])) });
      }
    }
  }
  return out;
};
const perRead = (a: Counts | undefined, b: Counts | undefined) =>
  Object.fromEntries(
    Object.entries(b ?? {})
      .map(([k, v]) => [k, round((v - (a?.[k] ?? 0)) / CALLS, 3)] as const)
      .filter(([, v]) => v >= 0.01)
      .sort((x, y) => y[1] - x[1]),
  );
try {
  const ours = await pkReadTable(site.client);
  const sides = { ours: { call: ours, pid: worker.pid }, floor: { call: (i: number) => floor.call(i).then(() => undefined), pid: floor.pid! } };
  const report: Record<string, Record<string, Counts>> = {};
  for (const [name, { call, pid }] of Object.entries(sides)) {
    await drive(1000, CONC, call);
    const pids = [process.pid, pid, ...childPids(pid)];
    const before = await snap(pids);
    await drive(CALLS, CONC, call);
    const after = await snap(pids);
    report[name] = Object.fromEntries(pids.map((p, i) => [i === 0 ? 'caller' : i === 1 ? 'worker' : `child ${p}`, perRead(before.get(p), after.get(p))]));
  }
  console.log(JSON.stringify({ calls: CALLS, inFlight: CONC, load: os.loadavg().map((l) => round(l, 2)), report }, null, 1));
} finally {
  await floor.close();
  await site.close();
  admin.disconnect();
  server.kill();
  await new Promise((r) => server.once('exit', r));
  rmSync(redisDir, { recursive: true, force: true });
}
