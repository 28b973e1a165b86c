// `npm run build && node --import tsx bench/call-profile.ts [read|insert]`: where one call's CPU
// goes, per process (issue 31). Runs CALLS sequential primary-key reads (or small inserts, with
// history capture on, as by default) against an `agentdb worker` started with `--cpu-prof`,
// profiles the caller (this process) with the inspector, and prints each process's CPU per call
// and its functions by self time. The worker's profile is written when it exits on SIGTERM.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import os from 'node:os';
import path from 'node:path';
import { benchSite } from './agentdb-worker.ts';
import { childPids, cpuSeconds } from './cpu.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const CALLS = Number(process.env.CALLS ?? 3000);
const TOP = Number(process.env.TOP ?? 30);
const kind = process.argv[2] === 'insert' ? 'insert' : 'read';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Self time by function (ms), and by file, of a V8 CPU profile. */
function summarise(name: string, p: Profile, calls: number): void {
  const self = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0));
  const byFn = new Map<string, number>();
  const byFile = new Map<string, number>();
  let total = 0;
  for (const n of p.nodes) {
    const us = self.get(n.id) ?? 0;
    const file = n.callFrame.url
      .replace(/^file:\/\//, '')
      .replace(/.*node_modules\//, 'nm/')
      .replace(/.*\/(src|dist)\//, '$1/');
    const fn = `${n.callFrame.functionName || '(anon)'} ${file}:${n.callFrame.lineNumber + 1}`;
    if (n.callFrame.functionName === '(idle)') continue;
    total += us;
    byFn.set(fn, (byFn.get(fn) ?? 0) + us);
    const pkg = file.startsWith('nm/')
      ? file
          .split('/')
          .slice(0, file.split('/')[1]!.startsWith('@') ? 3 : 2)
          .join('/')
      : file || n.callFrame.functionName;
    byFile.set(pkg, (byFile.get(pkg) ?? 0) + us);
  }
  const line = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, TOP)
      .map(([k, us]) => `  ${((us / total) * 100).toFixed(1).padStart(5)} %  ${(us / calls).toFixed(1).padStart(6)} µs/call  ${k}`)
      .join('\n');
  console.log(`\n== ${name}: ${(total / calls).toFixed(0)} µs sampled per call\n-- by function (self)\n${line(byFn)}\n-- by file or package\n${line(byFile)}`);
}

// PROFILE_DIR keeps the worker's profile there (for a closer look), else it goes with the run.
const profDir = process.env.PROFILE_DIR ?? mkdtempSync(path.join(os.tmpdir(), 'agentdb-prof-'));
const site = benchSite(REDIS_URL, 'profile', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent' });
// PROF_INTERVAL (µs, default V8's 1000) samples the worker and its children finer.
const interval = process.env.PROF_INTERVAL ? ` --cpu-prof-interval=${Number(process.env.PROF_INTERVAL)}` : '';
const worker = await site.worker({ NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${profDir}${interval}` });
const who = { workspace: 'bench', agent: 'profiler', settings: { database: 'agent' as const } };
const must = async (p: Promise<{ ok: boolean }>) => {
  const env = await p;
  if (!env.ok) throw new Error(`profile call failed: ${JSON.stringify(env)}`);
};
try {
  await must(site.client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)' } }));
  await must(
    site.client.call({
      ...who,
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: "INSERT INTO kv SELECT value, 'value-' || value FROM json_each(?)", params: ['[0,1,2,3,4,5,6,7,8,9]'] },
    }),
  );
  let n = 1000;
  const call = (i: number) =>
    kind === 'read'
      ? must(site.client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 10] } }))
      : must(site.client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO kv (id, v) VALUES (?, ?)', params: [n++, 'a small row'] } }));
  for (let i = 0; i < 500; i++) await call(i);
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  const children = childPids(worker.pid);
  const cpu = () => ({ caller: process.cpuUsage(), worker: cpuSeconds(worker.pid), children: children.reduce((s, p) => s + cpuSeconds(p), 0) });
  const before = cpu();
  await session.post('Profiler.start');
  const t0 = performance.now();
  for (let i = 0; i < CALLS; i++) await call(i);
  const ms = performance.now() - t0;
  const { profile } = await session.post('Profiler.stop');
  const after = cpu();
  const callerCpu = process.cpuUsage(before.caller);
  console.log(
    JSON.stringify({
      kind,
      calls: CALLS,
      msPerCall: +(ms / CALLS).toFixed(3),
      cpuMsPerCall: {
        caller: +((callerCpu.user + callerCpu.system) / 1000 / CALLS).toFixed(3),
        worker: +(((after.worker - before.worker) * 1000) / CALLS).toFixed(3),
        children: +(((after.children - before.children) * 1000) / CALLS).toFixed(3),
      },
    }),
  );
  summarise('caller', profile as unknown as Profile, CALLS);
  await worker.stop('SIGTERM');
  // The worker's profile covers its whole life (start-up and warm-up too): read as shares.
  for (const f of readdirSync(profDir)) summarise(`worker process ${f}`, JSON.parse(readFileSync(path.join(profDir, f), 'utf8')) as Profile, CALLS + 500);
} finally {
  await site.close();
  if (!process.env.PROFILE_DIR) rmSync(profDir, { recursive: true, force: true });
}
