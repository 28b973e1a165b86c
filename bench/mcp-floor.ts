// The transport floor under bench/mcp.ts: what an /mcp call costs with no queue behind it.
//
// Run alone, after `npm run build`: `node --import tsx bench/mcp-floor.ts` (BENCH_SEQ_CALLS,
// BENCH_ROUNDS as in run.ts). Not part of `npm run bench`: it explains that scenario's ratio
// rather than measuring agentdb.
//
// Why: the /mcp goal (p50 at most 1.5x the client library's) leaves the HTTP path the library's
// p50 times 0.5 on top of the call itself. An /mcp call is the server's own keyed call (the work
// the library does in its caller, the same queue, workers and Redis round trips) plus this
// floor: the SDK client and Node's fetch in the caller, one HTTP round trip, and the server's
// Fastify route, key check, MCP exchange and result fence. Measured here with the real route
// (dist's mcpRoutes) in a process of its own, its key check and keyed calls answered from
// memory, so the figure is that floor and nothing else; beside it, a bare node:http echo of the
// same answer driven by plain fetch, the least any HTTP hop from Node's fetch can cost; and
// `POST /v1/calls` on the whole app as `agentdb start` builds it, the same stubs behind it.
import { fork } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { cpuSeconds } from './cpu.ts';
import { ownSignalFetch } from './own-signal-fetch.ts';
import { drive, quantile, round } from './stats.ts';

const CALLS = Number(process.env.BENCH_SEQ_CALLS ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SELF = fileURLToPath(import.meta.url);
/** What the stub keyed call answers: a one-row primary-key read, as bench/mcp.ts reads. */
const ENVELOPE = {
  ok: true,
  callId: '00000000-0000-4000-8000-000000000000',
  tool: 'DATA_QUERY_SQL',
  credits: 1,
  result: { columns: ['v'], rows: [['value-1']], truncated: false },
};
const PRINCIPAL = { kind: 'agent', workspace: 'floor', agent: 'reader', keyId: 'k', settings: { database: 'agent' }, surface: { kind: 'data' } };
const KEY = `adb_${'f'.repeat(43)}`;

/**
 * The server side, in a child process: `mcp` (Fastify + dist's mcpRoutes), `v1` (dist's whole
 * app, for `POST /v1/calls`) or `http` (node:http).
 */
async function serve(kind: string): Promise<void> {
  let port: number;
  if (kind === 'v1') {
    // The whole app as `agentdb start` builds it (its Fastify set-up, every keyed route), the
    // key check and keyed calls answered from memory, as for /mcp above.
    const { buildApp } = await import(new URL(`${process.env.FLOOR_DIST ?? '../dist'}/src/http/app.js`, import.meta.url).href);
    const auth = { authenticate: async (token: string) => (token === KEY ? structuredClone(PRINCIPAL) : undefined) };
    const calls = { call: async () => structuredClone(ENVELOPE) };
    const app = buildApp({ redis: {}, shardCount: 1, members: {}, approvals: {}, keyed: { auth, calls, waitMs: 1000, approvalWaitMs: 1000 } });
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as { port: number }).port;
  } else if (kind === 'mcp') {
    const { default: Fastify } = await import('fastify');
    const { mcpRoutes } = await import(new URL(`${process.env.FLOOR_DIST ?? '../dist'}/src/http/mcp-routes.js`, import.meta.url).href);
    const app = Fastify();
    const auth = { authenticate: async (token: string) => (token === KEY ? structuredClone(PRINCIPAL) : undefined) };
    const calls = { call: async () => structuredClone(ENVELOPE) };
    app.register(mcpRoutes({ auth, calls, approvalWaitMs: 1000 }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as { port: number }).port;
  } else {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const { id } = JSON.parse(Buffer.concat(chunks).toString()) as { id: number };
        const out = JSON.stringify({ result: ENVELOPE, jsonrpc: '2.0', id });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
        res.end(out);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  }
  // Told to stop over IPC it exits normally, so `FLOOR_PROF=<dir>` (a --cpu-prof of it) is written.
  process.on('message', (m) => m === 'stop' && process.exit(0));
  process.send!({ port });
}

async function measure(kind: 'mcp' | 'http' | 'v1') {
  const child = fork(SELF, ['serve', kind], {
    execArgv: ['--import', 'tsx', ...(process.env.FLOOR_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.FLOOR_PROF}`] : [])],
  });
  try {
    const { port } = await new Promise<{ port: number }>((resolve) => child.once('message', (m) => resolve(m as { port: number })));
    const url = `http://127.0.0.1:${port}/${kind === 'v1' ? 'v1/calls' : 'mcp'}`;
    const args = (i: number) => ({ sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] });
    let one: (i: number) => Promise<void>;
    let close = async () => {};
    if (kind === 'mcp') {
      const mcp = new Client({ name: 'floor', version: '1' });
      await mcp.connect(
        new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${KEY}` } }, fetch: ownSignalFetch }),
      );
      one = async (i) => {
        const r = await mcp.callTool({ name: 'DATA_QUERY_SQL', arguments: args(i) });
        if (r.isError !== false) throw new Error(`mcp floor: ${JSON.stringify(r)}`);
      };
      close = () => mcp.close();
    } else if (kind === 'v1') {
      one = async (i) => {
        const res = await fetch(url, {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ tool: 'DATA_QUERY_SQL', arguments: args(i) }),
        });
        const env = (await res.json()) as { ok?: boolean };
        if (env.ok !== true) throw new Error(`v1 floor: ${JSON.stringify(env)}`);
      };
    } else {
      one = async (i) => {
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'DATA_QUERY_SQL', arguments: args(i) } }),
        });
        await res.json();
      };
    }
    await drive(Math.min(1000, CALLS), 1, one);
    const p50s: number[] = [];
    let caller = 0;
    let server = 0;
    for (let r = 0; r < ROUNDS; r++) {
      const before = process.cpuUsage();
      const serverBefore = cpuSeconds(child.pid!);
      const d = await drive(CALLS, 1, one);
      const used = process.cpuUsage(before);
      caller += (used.user + used.system) / 1000 / (CALLS * ROUNDS);
      server += ((cpuSeconds(child.pid!) - serverBefore) * 1000) / (CALLS * ROUNDS);
      p50s.push(
        quantile(
          [...d.latencies].sort((a, b) => a - b),
          0.5,
        ),
      );
    }
    await close();
    return {
      p50Ms: round(
        quantile(
          p50s.sort((a, b) => a - b),
          0.5,
        ),
      ),
      cpuMsPerCall: { caller: round(caller), server: round(server) },
    };
  } finally {
    await new Promise((resolve) => {
      child.once('exit', resolve);
      child.send('stop');
    });
  }
}

if (process.argv[2] === 'serve') {
  await serve(process.argv[3]!);
} else {
  const mcp = await measure('mcp');
  const v1 = await measure('v1');
  const bare = await measure('http');
  console.log(JSON.stringify({ calls: CALLS, rounds: ROUNDS, mcpFloor: mcp, v1Floor: v1, bareHttp: bare }));
  console.log(`with no queue behind them: /mcp p50 ${mcp.p50Ms} ms, /v1/calls p50 ${v1.p50Ms} ms; bare node:http + fetch: p50 ${bare.p50Ms} ms`);
}
