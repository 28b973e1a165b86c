// `npm run build && node --import tsx bench/mcp-floor-ab.ts`: the server's CPU per `/mcp` call
// of two builds' routes side by side, nothing behind them (bench/mcp-floor.ts's `serve mcp`: the
// key check and keyed calls answered from memory), rounds alternating A B B A …, so that a cut of
// a few microseconds in the route shows through a loaded machine's drift. One SDK client per
// build (tools listed first, as clients do) in this process; each server a process of its own,
// its CPU read from /proc. DISTS (default `../.ab-base/dist,../dist`, relative to bench/), N calls
// per round (default 2000), R rounds (default 10); PROF=<dir> writes a --cpu-prof of each server.
// FLOOR_KIND=v1: the route inside the whole app (`buildApp`, as `agentdb start` serves it, with
// its app-wide hooks) rather than alone on a bare Fastify.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { cpuSeconds } from './cpu.ts';
import { ownSignalFetch } from './own-signal-fetch.ts';
import { median } from './stats.ts';

const FLOOR = fileURLToPath(new URL('./mcp-floor.ts', import.meta.url));
/** The key bench/mcp-floor.ts's stub check takes. */
const KEY = `adb_${'f'.repeat(43)}`;
const DISTS = (process.env.DISTS ?? '../.ab-base/dist,../dist').split(',');
const N = Number(process.env.N ?? 2000);
const R = Number(process.env.R ?? 10);

interface Side {
  dist: string;
  pid: number;
  one: (i: number) => Promise<void>;
  server: number[];
  caller: number[];
  stop: () => void;
}

const sides: Side[] = [];
for (const dist of DISTS) {
  const prof = process.env.PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.PROF}`] : [];
  const child = fork(FLOOR, ['serve', process.env.FLOOR_KIND === 'v1' ? 'v1' : 'mcp'], {
    execArgv: ['--import', 'tsx', ...prof],
    env: { ...process.env, FLOOR_DIST: dist },
  });
  const { port } = await new Promise<{ port: number }>((resolve) => child.once('message', (m) => resolve(m as { port: number })));
  const mcp = new Client({ name: 'ab', version: '1' });
  await mcp.connect(
    new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${KEY}` } },
      fetch: ownSignalFetch,
    }),
  );
  await mcp.listTools();
  const one = async (i: number) => {
    const r = await mcp.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] } });
    if (r.isError !== false) throw new Error(`mcp-floor-ab: ${JSON.stringify(r)}`);
  };
  for (let i = 0; i < 1500; i++) await one(i);
  sides.push({ dist, pid: child.pid!, one, server: [], caller: [], stop: () => child.send('stop') });
}
try {
  for (let r = 0; r < R; r++) {
    for (const s of r % 2 ? [...sides].reverse() : sides) {
      const caller = process.cpuUsage();
      const server = cpuSeconds(s.pid);
      for (let i = 0; i < N; i++) await s.one(i);
      const used = process.cpuUsage(caller);
      s.server.push(((cpuSeconds(s.pid) - server) * 1e6) / N);
      s.caller.push((used.user + used.system) / N);
    }
  }
  for (const s of sides) {
    console.log(
      `${s.dist}: server µs per call ${median(s.server).toFixed(1)} (rounds ${s.server.map((x) => x.toFixed(0)).join(' ')}); SDK client µs per call ${median(s.caller).toFixed(1)}`,
    );
  }
  const [a, b] = sides;
  if (a && b) {
    const lower = a.server.filter((x, i) => b.server[i]! < x).length;
    console.log(
      `${b.dist} over ${a.dist}, server CPU per call: ${median(a.server.map((x, i) => b.server[i]! / x)).toFixed(3)} (paired rounds); lower in ${lower} of ${R}`,
    );
  }
} finally {
  for (const s of sides) s.stop();
}
