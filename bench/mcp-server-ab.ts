// `npm run build && node --import tsx bench/mcp-server-ab.ts`: the server's CPU per `/mcp`
// primary-key read of two builds' `agentdb start` (HTTP and shard workers in one process, real
// calls behind the route, as bench/mcp.ts runs it), side by side, rounds alternating A B B A …,
// so that a cut of tens of microseconds in the server shows through a loaded machine's drift.
// Each build gets a prefix, a data folder, a key and an SDK client of its own (tools listed
// first, as clients do); `/v1/calls` from fetch runs beside it on each server as a control.
// DISTS (default `../.ab-base/dist,../dist`, relative to bench/), N calls per round (default
// 1000), R rounds (default 8). PROF=1: each server runs with --cpu-prof, and its samples taken
// during its `/mcp` rounds are summed by file (BY=fn: by function), µs per call, A beside B.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Redis } from 'ioredis';
import { keysFor } from '../src/redis/keys.ts';
import { AgentKeyRing } from '../src/registry/agent-keys.ts';
import { AgentRegistry } from '../src/registry/agents.ts';
import { WorkspaceRegistry } from '../src/registry/workspaces.ts';
import { deleteKeys } from '../test/helpers/harness.ts';
import { cpuSeconds } from './cpu.ts';
import { ownSignalFetch } from './own-signal-fetch.ts';
import { startProcess, stopProcess } from './process.ts';
import { median } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DISTS = (process.env.DISTS ?? '../.ab-base/dist,../dist').split(',');
const N = Number(process.env.N ?? 1000);
const R = Number(process.env.R ?? 8);
const PROF = process.env.PROF === '1';

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

interface Side {
  dist: string;
  pid: number;
  prefix: string;
  dataDir: string;
  profDir?: string;
  mcp: (i: number) => Promise<void>;
  v1: (i: number) => Promise<void>;
  server: { mcp: number[]; v1: number[] };
  /** The monotonic windows (µs) of its rounds, for the profile. */
  windows: { mcp: Window[]; v1: Window[] };
  stop: () => Promise<void>;
}

const sql = 'SELECT v FROM kv WHERE id = ?';

async function side(dist: string, n: number): Promise<Side> {
  const prefix = `bench-mcpab${n}-${process.pid}`;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-mcpab-'));
  const redis = new Redis(REDIS_URL);
  const keys = keysFor(prefix);
  await new WorkspaceRegistry(redis, keys).put('mcpab', 'pro');
  const agents = new AgentRegistry(redis, keys);
  await agents.put('mcpab', 'reader', { displayName: 'Reader', settings: { database: 'agent' } });
  const { key } = await new AgentKeyRing(redis, keys, agents).mint('mcpab', 'reader');
  redis.disconnect();
  const profDir = PROF ? mkdtempSync(path.join(os.tmpdir(), 'agentdb-mcpab-prof-')) : undefined;
  const bin = fileURLToPath(new URL(`${dist}/bin/agentdb.js`, import.meta.url));
  const args = [...(profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`, '--cpu-prof-interval=100'] : []), bin, 'start'];
  const env = { REDIS_URL, AGENTDB_PREFIX: prefix, AGENTDB_DATA_DIR: dataDir, LOG_LEVEL: 'info', PORT: '0', HOST: '127.0.0.1', RATE_LIMITS: 'off' };
  const { child, output } = await startProcess(process.execPath, args, env, /"msg":"agentdb ready"/);
  const url = /"address":"([^"]+)"/.exec(output)?.[1];
  if (!url) throw new Error(`mcp-server-ab: no address in: ${output}`);
  const client = new Client({ name: 'ab', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers: { authorization: `Bearer ${key}` } }, fetch: ownSignalFetch }),
  );
  await client.listTools();
  const write = async (s: string, params: unknown[] = []) => {
    const r = await client.callTool({ name: 'DATA_WRITE_SQL', arguments: { sql: s, params } });
    if (r.isError !== false) throw new Error(`mcp-server-ab: ${JSON.stringify(r)}`);
  };
  await write('CREATE TABLE IF NOT EXISTS kv (id INTEGER PRIMARY KEY, v TEXT)');
  await write("INSERT OR IGNORE INTO kv SELECT value, 'value-' || value FROM json_each(?)", [JSON.stringify(Array.from({ length: 1000 }, (_, i) => i))]);
  const mcp = async (i: number) => {
    const r = await client.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql, params: [i % 1000] } });
    if (r.isError !== false) throw new Error(`mcp-server-ab: ${JSON.stringify(r)}`);
  };
  const v1Url = new URL('/v1/calls', url);
  const v1 = async (i: number) => {
    const res = await fetch(v1Url, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tool: 'DATA_QUERY_SQL', arguments: { sql, params: [i % 1000] } }),
    });
    const env = (await res.json()) as { ok: boolean };
    if (!env.ok) throw new Error(`mcp-server-ab: ${JSON.stringify(env)}`);
  };
  for (let i = 0; i < 1000; i++) await mcp(i);
  for (let i = 0; i < 500; i++) await v1(i);
  return {
    dist,
    pid: child.pid!,
    prefix,
    dataDir,
    ...(profDir ? { profDir } : {}),
    mcp,
    v1,
    server: { mcp: [], v1: [] },
    windows: { mcp: [], v1: [] },
    stop: async () => {
      await client.close();
      await stopProcess(child);
    },
  };
}

/** µs of the server's CPU per call over N calls of `kind`, its window noted for the profile. */
async function round(s: Side, kind: 'mcp' | 'v1'): Promise<void> {
  const c0 = cpuSeconds(s.pid);
  const from = Number(process.hrtime.bigint() / 1000n);
  for (let i = 0; i < N; i++) await s[kind](i);
  s.windows[kind].push({ from, to: Number(process.hrtime.bigint() / 1000n) });
  s.server[kind].push(((cpuSeconds(s.pid) - c0) * 1e6) / N);
}

/** Self time (µs) by file (or function, BY=fn) of the profile's samples inside `windows`. */
function selfTimes(p: Profile, windows: Window[]): Map<string, number> {
  const name = new Map<number, string>();
  for (const n of p.nodes) {
    const file = n.callFrame.url
      .replace(/^file:\/\//, '')
      .replace(/.*node_modules\//, 'nm/')
      .replace(/^\/.*\/(src|dist)\//, '$1/');
    const pkg = file.startsWith('nm/')
      ? file
          .split('/')
          .slice(0, file.split('/')[1]!.startsWith('@') ? 3 : 2)
          .join('/')
      : file;
    const fn = `${n.callFrame.functionName || '(anon)'} ${file}:${n.callFrame.lineNumber + 1}`;
    name.set(n.id, process.env.BY === 'fn' ? fn : pkg || n.callFrame.functionName);
  }
  const out = new Map<string, number>();
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    const dt = p.timeDeltas[i + 1] ?? 0;
    if (!windows.some((w) => t >= w.from && t <= w.to)) continue;
    const fn = name.get(p.samples[i]!)!;
    if (fn === '(idle)') continue;
    out.set(fn, (out.get(fn) ?? 0) + dt);
  }
  return out;
}

const sides: Side[] = [];
try {
  for (const [n, dist] of DISTS.entries()) sides.push(await side(dist, n));
  for (let r = 0; r < R; r++) {
    for (const s of r % 2 ? [...sides].reverse() : sides) {
      await round(s, 'mcp');
      await round(s, 'v1');
    }
  }
  const fmt = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(' ');
  for (const s of sides) {
    console.log(
      `${s.dist}: server µs per /mcp call ${median(s.server.mcp).toFixed(1)} (${fmt(s.server.mcp)}); per /v1/calls call ${median(s.server.v1).toFixed(1)} (${fmt(s.server.v1)})`,
    );
  }
  const [a, b] = sides;
  if (a && b) {
    const ratio = (k: 'mcp' | 'v1') => median(a.server[k].map((x, i) => b.server[k][i]! / x)).toFixed(3);
    const lower = a.server.mcp.filter((x, i) => b.server.mcp[i]! < x).length;
    const over = (s: Side) => median(s.server.mcp.map((x, i) => x - s.server.v1[i]!)).toFixed(1);
    console.log(`${b.dist} ÷ ${a.dist}, server CPU per call (paired rounds): /mcp ${ratio('mcp')} (lower in ${lower} of ${R}), /v1/calls ${ratio('v1')}`);
    console.log(`/mcp over /v1/calls, µs per call (median of rounds): ${a.dist} ${over(a)}, ${b.dist} ${over(b)}`);
  }
} finally {
  for (const s of sides) await s.stop();
  for (const s of sides) {
    await deleteKeys(s.prefix);
    rmSync(s.dataDir, { recursive: true, force: true });
  }
}
if (PROF) {
  // Columns: each build's /mcp, then its /v1/calls.
  const times = sides.flatMap((s) => {
    const file = readdirSync(s.profDir!).find((f) => f.includes(`.${s.pid}.`))!;
    const p = JSON.parse(readFileSync(path.join(s.profDir!, file), 'utf8')) as Profile;
    rmSync(s.profDir!, { recursive: true, force: true });
    return [selfTimes(p, s.windows.mcp), selfTimes(p, s.windows.v1)];
  });
  const calls = N * R;
  const keys = new Set(times.flatMap((t) => [...t.keys()]));
  const total = times.map((t) => [...t.values()].reduce((x, y) => x + y, 0) / calls);
  console.log(`sampled µs per call (each build: /mcp, /v1/calls): ${total.map((x) => x.toFixed(1)).join(' · ')}`);
  const rows = [...keys].map((k) => ({ k, v: times.map((t) => (t.get(k) ?? 0) / calls) }));
  for (const r of rows.sort((x, y) => y.v.at(-2)! - x.v.at(-2)!).slice(0, Number(process.env.TOP ?? 40)))
    console.log(`${r.v.map((x) => x.toFixed(1).padStart(7)).join(' ')}   ${r.k}`);
}
