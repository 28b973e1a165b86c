// `node --import tsx bench/http-hop.ts`: what the HTTP hop costs the server, against the
// client library, call by call (issue 28 part 5). One `agentdb start` (the built CLI, DIST,
// default ../dist); from this process, blocks of N primary-key reads taking turns, R rounds:
// `library` (a client library of its own, opened before its block, closed after),
// `v1h` (`POST /v1/calls` from node:http, one kept-alive socket) and `mcph` (`POST /mcp`, the
// same JSON-RPC tools/call, node:http). Per call and side: the server's main thread CPU
// (schedstat), its voluntary switches (its wakes), its read/write system calls, Redis
// commands (INFO commandstats: give it a redis-server of its own, REDIS_URL), and the
// caller's CPU. PROF=1: the server runs with --cpu-prof and its samples in each side's blocks
// are summed by function (TOP rows), µs per call, so the HTTP sides' extra over the library's
// worker-only share reads function by function. CALLER_PROF=1: the same of this process.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import inspector from 'node:inspector/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { AgentDbClient } from '../src/calls/client.ts';
import { keysFor } from '../src/redis/keys.ts';
import { AgentKeyRing } from '../src/registry/agent-keys.ts';
import { AgentRegistry } from '../src/registry/agents.ts';
import { WorkspaceRegistry } from '../src/registry/workspaces.ts';
import { deleteKeys } from '../test/helpers/harness.ts';
import { startProcess, stopProcess } from './process.ts';
import { median } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DIST = process.env.DIST ?? '../dist';
const N = Number(process.env.N ?? 500);
const R = Number(process.env.R ?? 6);
const PROF = process.env.PROF === '1';
const CALLER_PROF = process.env.CALLER_PROF === '1';
const SIDES = (process.env.SIDES ?? 'library,v1h,mcph').split(',');

interface Profile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}
interface Window {
  from: number;
  to: number;
}

const prefix = `bench-hop-${process.pid}`;
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-hop-'));
const profDir = PROF ? mkdtempSync(path.join(os.tmpdir(), 'agentdb-hop-prof-')) : undefined;
const redis = new Redis(REDIS_URL);
const keys = keysFor(prefix);
await new WorkspaceRegistry(redis, keys).put('hop', 'pro');
const agents = new AgentRegistry(redis, keys);
await agents.put('hop', 'reader', { displayName: 'Reader', settings: { database: 'agent' } });
const { key } = await new AgentKeyRing(redis, keys, agents).mint('hop', 'reader');
const bin = fileURLToPath(new URL(`${DIST}/bin/agentdb.js`, import.meta.url));
const args = [
  ...(process.env.PERF === '1' ? ['--perf-basic-prof', '--interpreted-frames-native-stack'] : []),
  ...(profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`, '--cpu-prof-interval=50'] : []),
  bin,
  'start',
];
const env = { REDIS_URL, AGENTDB_PREFIX: prefix, AGENTDB_DATA_DIR: dataDir, LOG_LEVEL: 'info', PORT: '0', HOST: '127.0.0.1', RATE_LIMITS: 'off' };
const { child, output } = await startProcess(process.execPath, args, env, /"msg":"agentdb ready"/);
const url = /"address":"([^"]+)"/.exec(output)?.[1];
if (!url) throw new Error(`http-hop: no address in: ${output}`);
const pid = child.pid!;

const who = { workspace: 'hop', agent: 'reader', settings: { database: 'agent' as const } };
const sql = 'SELECT v FROM kv WHERE id = ?';
let library: AgentDbClient | undefined;
const openLibrary = async () => {
  const c = new AgentDbClient({ redisUrl: REDIS_URL, prefix, rateLimits: false });
  const e = await c.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } });
  if (!e.ok) throw new Error(JSON.stringify(e));
  return c;
};
library = await openLibrary();
const setup: [string, unknown[]][] = [
  ['CREATE TABLE IF NOT EXISTS kv (id INTEGER PRIMARY KEY, v TEXT)', []],
  ["INSERT OR IGNORE INTO kv SELECT value, 'v-' || value FROM json_each(?)", [JSON.stringify(Array.from({ length: 1000 }, (_, i) => i))]],
];
for (const [s, params] of setup) {
  const e = await library.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: s, params } });
  if (!e.ok) throw new Error(JSON.stringify(e));
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const post = (p: string, body: string) =>
  new Promise<string>((resolve, reject) => {
    const req = http.request(
      new URL(p, url),
      {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(Buffer.concat(chunks).toString()));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
const calls: Record<string, (i: number) => Promise<void>> = {
  library: async (i) => {
    const e = await library!.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql, params: [i % 1000] } });
    if (!e.ok) throw new Error(JSON.stringify(e));
  },
  v1h: async (i) => {
    const e = JSON.parse(await post('/v1/calls', JSON.stringify({ tool: 'DATA_QUERY_SQL', arguments: { sql, params: [i % 1000] } }))) as { ok: boolean };
    if (!e.ok) throw new Error(JSON.stringify(e));
  },
  mcph: async (i) => {
    const msg = { jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'DATA_QUERY_SQL', arguments: { sql, params: [i % 1000] } } };
    const a = JSON.parse(await post('/mcp', JSON.stringify(msg))) as { result?: { isError?: boolean } };
    if (a.result?.isError !== false) throw new Error(JSON.stringify(a));
  },
};
for (const s of SIDES) for (let i = 0; i < 2000; i++) await calls[s]!(i);
await library.close();

// STRACE=1: the server's system calls (with fds and times) over 20 calls of each side, to
// /tmp/http-hop-strace.<side>, to read a call's order of wakes, reads and writes.
if (process.env.STRACE === '1') {
  const { spawn } = await import('node:child_process');
  for (const s of SIDES) {
    if (s === 'library') library = await openLibrary();
    const st = spawn('strace', ['-f', '-tt', '-p', String(pid), '-o', `/tmp/http-hop-strace.${s}`], { stdio: 'ignore' });
    await new Promise((r) => setTimeout(r, 1000));
    for (let i = 0; i < Number(process.env.STRACE_CALLS ?? 20); i++) await calls[s]!(i);
    st.kill('SIGINT');
    await new Promise((r) => st.once('exit', r));
    if (s === 'library') await library!.close();
  }
}
// PERF=1: `perf record` of the server's main thread over PERF_CALLS calls of each side (the
// server started with --perf-basic-prof), to /tmp/http-hop-perf.<side>.data: on-CPU samples
// only, which a loaded machine's preemptions do not inflate as they do --cpu-prof's.
if (process.env.PERF === '1') {
  const { spawn } = await import('node:child_process');
  for (const s of SIDES) {
    if (s === 'library') library = await openLibrary();
    const pr = spawn(
      'perf',
      [
        'record',
        '-q',
        ...(process.env.PERF_G === '1' ? ['-g'] : []),
        '-e',
        'cpu-clock',
        '-c',
        '50000',
        '-t',
        String(pid),
        '-o',
        `/tmp/http-hop-perf.${s}.data`,
      ],
      { stdio: 'ignore' },
    );
    await new Promise((r) => setTimeout(r, 1000));
    for (let i = 0; i < Number(process.env.PERF_CALLS ?? 2000); i++) await calls[s]!(i);
    pr.kill('SIGINT');
    await new Promise((r) => pr.once('exit', r));
    if (s === 'library') await library!.close();
  }
}
const schedNs = () => Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]);
const wakes = () => Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8'))![1]);
const io = () => {
  const t = readFileSync(`/proc/${pid}/io`, 'utf8');
  return Number(/syscr: (\d+)/.exec(t)![1]) + Number(/syscw: (\d+)/.exec(t)![1]);
};
const cmds = async () => {
  const info = await redis.info('commandstats');
  let n = 0;
  for (const m of info.matchAll(/calls=(\d+)/g)) n += Number(m[1]);
  return n;
};
type Tot = { server: number[]; wakes: number[]; sys: number[]; cmds: number[]; caller: number[]; p50: number[] };
const tot: Record<string, Tot> = Object.fromEntries(SIDES.map((s) => [s, { server: [], wakes: [], sys: [], cmds: [], caller: [], p50: [] }]));
const windows: Record<string, Window[]> = Object.fromEntries(SIDES.map((s) => [s, []]));
const session = CALLER_PROF ? new inspector.Session() : undefined;
if (session) {
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 50 });
  await session.post('Profiler.start');
}
for (let r = 0; r < R; r++) {
  const order = r % 2 ? [...SIDES].reverse() : SIDES;
  for (const s of order) {
    if (s === 'library') library = await openLibrary();
    const c0 = await cmds();
    const [n0, w0, y0, u0] = [schedNs(), wakes(), io(), process.cpuUsage()];
    const from = Number(process.hrtime.bigint() / 1000n);
    const lat: number[] = [];
    for (let i = 0; i < N; i++) {
      const t = performance.now();
      await calls[s]!(i);
      lat.push(performance.now() - t);
    }
    const to = Number(process.hrtime.bigint() / 1000n);
    const u = process.cpuUsage(u0);
    const t = tot[s]!;
    t.server.push((schedNs() - n0) / 1e3 / N);
    t.wakes.push((wakes() - w0) / N);
    t.sys.push((io() - y0) / N);
    t.caller.push((u.user + u.system) / N);
    t.p50.push(median(lat));
    windows[s]!.push({ from, to });
    t.cmds.push(((await cmds()) - c0 - 1) / N);
    if (s === 'library') await library!.close();
  }
}
let callerProfile: Profile | undefined;
if (session) callerProfile = ((await session.post('Profiler.stop')) as { profile: Profile }).profile;
const f = (xs: number[], d = 1) => median(xs).toFixed(d);
console.log(`load ${os.loadavg()[0]!.toFixed(1)}; ${R} rounds × ${N} calls a side; medians of the rounds, per call`);
console.log('side      p50 ms  server µs  caller µs  server wakes  server syscalls  redis cmds');
for (const s of SIDES) {
  const t = tot[s]!;
  console.log(
    `${s.padEnd(8)} ${f(t.p50, 3).padStart(7)} ${f(t.server).padStart(10)} ${f(t.caller).padStart(10)} ${f(t.wakes, 2).padStart(13)} ${f(t.sys, 2).padStart(16)} ${f(t.cmds, 2).padStart(11)}`,
  );
}
await stopProcess(child);
redis.disconnect();
await deleteKeys(prefix);
rmSync(dataDir, { recursive: true, force: true });

function byFunction(p: Profile, ws: Window[]): Map<string, number> {
  const name = new Map<number, string>();
  for (const n of p.nodes) {
    const file = n.callFrame.url
      .replace(/^file:\/\//, '')
      .replace(/.*node_modules\//, 'nm/')
      .replace(/^\/.*\/(src|dist)\//, '$1/');
    name.set(n.id, `${n.callFrame.functionName || '(anon)'} ${file}:${n.callFrame.lineNumber + 1}`);
  }
  const out = new Map<string, number>();
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    const dt = p.timeDeltas[i + 1] ?? 0;
    if (!ws.some((w) => t >= w.from && t <= w.to)) continue;
    const fn = name.get(p.samples[i]!)!;
    if (fn.startsWith('(idle)')) continue;
    out.set(fn, (out.get(fn) ?? 0) + dt);
  }
  return out;
}
function table(title: string, p: Profile) {
  const times = SIDES.map((s) => byFunction(p, windows[s]!));
  const n = N * R;
  console.log(
    `${title}: sampled µs per call (${SIDES.join(' · ')}): ${times.map((t) => ([...t.values()].reduce((a, b) => a + b, 0) / n).toFixed(1)).join(' · ')}`,
  );
  const all = new Set(times.flatMap((t) => [...t.keys()]));
  const rows = [...all].map((k) => ({ k, v: times.map((t) => (t.get(k) ?? 0) / n) }));
  const spread = (v: number[]) => Math.max(...v) - Math.min(...v);
  const by = process.env.SORT === 'spread' ? spread : (v: number[]) => Math.max(...v);
  for (const r of rows.sort((x, y) => by(y.v) - by(x.v)).slice(0, Number(process.env.TOP ?? 40)))
    console.log(`${r.v.map((x) => x.toFixed(1).padStart(7)).join(' ')}   ${r.k}`);
}
if (profDir) {
  const file = readdirSync(profDir).find((x) => x.includes(`.${pid}.`))!;
  table('server', JSON.parse(readFileSync(path.join(profDir, file), 'utf8')) as Profile);
  rmSync(profDir, { recursive: true, force: true });
}
if (callerProfile) table('caller', callerProfile);
