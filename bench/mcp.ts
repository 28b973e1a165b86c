// PK reads through POST /mcp (official SDK client, Streamable HTTP) against the client library.
import { mkdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import type { Config } from '../src/config.ts';
import { AgentDbClient } from '../src/calls/client.ts';
import { keysFor } from '../src/redis/keys.ts';
import { AgentKeyRing } from '../src/registry/agent-keys.ts';
import { AgentRegistry } from '../src/registry/agents.ts';
import { WorkspaceRegistry } from '../src/registry/workspaces.ts';
import { cpuSeconds } from './cpu.ts';
import { ownSignalFetch } from './own-signal-fetch.ts';
import { startProcess, stopProcess } from './process.ts';
import { drive, median, round, summarise, type RunStats } from './stats.ts';

/**
 * The built CLI, as deployed (`npm run bench` builds it first); `BENCH_DIST` names another
 * build's `dist` (absolute, or relative to bench/), to run the build before a change beside it.
 */
const BIN = fileURLToPath(new URL(`${process.env.BENCH_DIST ?? '../dist'}/bin/agentdb.js`, import.meta.url));

/**
 * The same primary-key read, one at a time, through the client library and through `/mcp`, in
 * interleaved rounds. The ratio of p50s is what MCP's layers cost: HTTP, the JSON-RPC session
 * per request (stateless: a server and transport per request), key lookup and the
 * untrusted-data fence.
 *
 * Set up as people run it: the server is `agentdb start` (the built CLI, HTTP and shard workers
 * in one process), and both callers are in this process, as a user's MCP client and a user's
 * runtime with the client library are processes of their own. Both reach the same workers of
 * the same server process, so the comparison stays fair: the library enqueues onto Redis and
 * that process's workers take the call; the MCP client posts to that process's HTTP endpoint,
 * which enqueues the same call onto Redis for the same workers. (It used to run the HTTP server
 * from source in this process beside both clients: that measured the TypeScript loader's code
 * rather than the built one, and charged the server's CPU to the client's event loop.)
 */
export async function benchMcp(config: Config, opts: { calls: number; rounds: number }) {
  // A prefix and data folder of its own: the caller's workers must not take this server's calls.
  const prefix = `${config.prefix}-mcp`;
  const dataDir = path.join(config.dataDir, 'mcp');
  mkdirSync(dataDir, { recursive: true });
  const redis = new Redis(config.redisUrl);
  const keys = keysFor(prefix);
  await new WorkspaceRegistry(redis, keys).put('mcpbench', 'pro');
  const agents = new AgentRegistry(redis, keys);
  await agents.put('mcpbench', 'reader', { displayName: 'Reader', settings: { database: 'agent' } });
  const { key } = await new AgentKeyRing(redis, keys, agents).mint('mcpbench', 'reader');
  const env = {
    REDIS_URL: config.redisUrl,
    AGENTDB_PREFIX: prefix,
    AGENTDB_DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    PORT: '0',
    HOST: '127.0.0.1',
    WORKER_CONCURRENCY: String(config.workerConcurrency),
    // One tenant measured at thousands of calls a second: no plan's rate would let it through.
    RATE_LIMITS: 'off',
  };
  const { child, output } = await startProcess(process.execPath, [BIN, 'start'], env, /"msg":"agentdb ready"/);
  const url = /"address":"([^"]+)"/.exec(output)?.[1];
  if (!url) throw new Error(`bench mcp: no address in agentdb start's output: ${output}`);
  try {
    return await measure(config, prefix, url, key, child.pid!, opts);
  } finally {
    await stopProcess(child);
    redis.disconnect();
  }
}

async function measure(config: Config, prefix: string, url: string, key: string, serverPid: number, opts: { calls: number; rounds: number }) {
  const mcp = new Client({ name: 'bench', version: '1' });
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', url), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
    fetch: ownSignalFetch,
  });
  await mcp.connect(transport);
  // As an MCP client does before its model can call a tool: from then on the SDK checks every
  // result's structuredContent against the tool's outputSchema (~0.1 µs a call, measured).
  await mcp.listTools();

  const who = { workspace: 'mcpbench', agent: 'reader', settings: { database: 'agent' as const } };
  const must = (ok: boolean, what: unknown) => {
    if (!ok) throw new Error(`bench mcp step failed: ${JSON.stringify(what)}`);
  };
  // A client library's event reader reads every completion of the prefix, the MCP and /v1
  // calls' too: one that stayed open would charge this (the MCP client's) process for reading
  // the server's events, which a user's MCP client never does. So each library round has a
  // client of its own, opened (and its reader started) before the round and closed after.
  const openLibrary = async () => {
    const c = new AgentDbClient({ redisUrl: config.redisUrl, prefix, shardCount: config.shardCount, rateLimits: false });
    const env = await c.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } });
    must(env.ok, env);
    return c;
  };
  let library = await openLibrary();
  const made = await library.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE IF NOT EXISTS kv (id INTEGER PRIMARY KEY, v TEXT)' } });
  must(made.ok, made);
  const filled = await library.call({
    ...who,
    tool: 'DATA_WRITE_SQL',
    arguments: {
      sql: "INSERT OR IGNORE INTO kv SELECT value, 'value-' || value FROM json_each(?)",
      params: [JSON.stringify(Array.from({ length: 1000 }, (_, i) => i))],
    },
  });
  must(filled.ok, filled);

  const viaLibrary = async (i: number) => {
    const env = await library.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] } });
    must(env.ok, env);
  };
  const viaMcp = async (i: number) => {
    const r = await mcp.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] } });
    must(r.isError === false, r);
  };
  // A control: the same JSON-RPC tools/call POSTed to /mcp by a bare fetch, with the headers the
  // SDK client sends. Its distance from the SDK client's side is what that client's own handling
  // costs (its JSON-RPC layer and schema checks); its distance from /v1/calls is the route's.
  const mcpUrl = new URL('/mcp', url);
  const mcpHeaders = {
    authorization: `Bearer ${key}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': transport.protocolVersion ?? LATEST_PROTOCOL_VERSION,
  };
  const viaMcpFetch = async (i: number) => {
    const res = await fetch(mcpUrl, {
      method: 'POST',
      headers: mcpHeaders,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: i,
        method: 'tools/call',
        params: { name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] } },
      }),
    });
    const answer = (await res.json()) as { result?: { isError?: boolean } };
    must(answer.result?.isError === false, answer);
  };
  // A reference: the same read through POST /v1/calls (fetch, keep-alive), to tell what HTTP
  // and the key cost from what the MCP layers add.
  const v1Url = new URL('/v1/calls', url);
  const viaV1 = async (i: number) => {
    const res = await fetch(v1Url, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] } }),
    });
    const env = (await res.json()) as { ok: boolean };
    must(env.ok, env);
  };
  // The same POST from node:http (a kept-alive agent) rather than fetch: Node's fetch (undici)
  // costs its caller ~0.25 ms of CPU more per call, a hop of the caller's choosing, not the
  // server's (docs/benchmarks.md, session 21). The two sides tell one from the other.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const viaV1Http = (i: number) =>
    new Promise<void>((resolve, reject) => {
      const body = JSON.stringify({ tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] } });
      const req = http.request(
        v1Url,
        { method: 'POST', agent, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const env = JSON.parse(Buffer.concat(chunks).toString()) as { ok: boolean };
            must(env.ok, env);
            resolve();
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  // Every side warmed alike (BENCH_MCP_WARM_CALLS, default 3,000 each; 500 before session 33): the
  // server process has the most code to compile (Fastify, the routes, the worker), and V8 goes on
  // compiling hot paths for tens of seconds (session 31, P7); a service runs warm.
  const warmCalls = Number(process.env.BENCH_MCP_WARM_CALLS ?? 3000);
  for (const warm of [viaLibrary, viaMcp, viaMcpFetch, viaV1, viaV1Http]) await drive(warmCalls, 1, warm);
  await library.close();

  // CPU per call of the caller (this process) and of the server process (HTTP and workers; not
  // its executor child, whose share is the same query on every side): on a shared machine it
  // moves far less than latency does, and it is what the layers cost.
  type Side = 'library' | 'mcp' | 'mcpFetch' | 'v1' | 'v1h';
  const cpu: Record<Side, { caller: number; server: number }> = {
    library: { caller: 0, server: 0 },
    mcp: { caller: 0, server: 0 },
    mcpFetch: { caller: 0, server: 0 },
    v1: { caller: 0, server: 0 },
    v1h: { caller: 0, server: 0 },
  };
  const stats: Record<Side, RunStats[]> = { library: [], mcp: [], mcpFetch: [], v1: [], v1h: [] };
  const measured = async (side: Side, fn: (i: number) => Promise<void>) => {
    const before = process.cpuUsage();
    const serverBefore = cpuSeconds(serverPid);
    const d = await drive(opts.calls, 1, fn);
    const used = process.cpuUsage(before);
    const n = opts.calls * opts.rounds;
    cpu[side].caller += (used.user + used.system) / 1000 / n;
    cpu[side].server += ((cpuSeconds(serverPid) - serverBefore) * 1000) / n;
    return summarise(d.latencies, d.seconds);
  };
  const sides: Record<Side, () => Promise<RunStats>> = {
    library: async () => {
      library = await openLibrary();
      const s = await measured('library', viaLibrary);
      await library.close();
      return s;
    },
    mcp: () => measured('mcp', viaMcp),
    mcpFetch: () => measured('mcpFetch', viaMcpFetch),
    v1: () => measured('v1', viaV1),
    v1h: () => measured('v1h', viaV1Http),
  };
  // The goals are read per round, `/mcp` against the other sides of its own round, and the
  // rounds' median taken: the machine's drift between rounds then cancels rather than landing
  // on one side.
  const order: Side[] = ['library', 'mcp', 'mcpFetch', 'v1', 'v1h'];
  // BENCH_MCP_ORDER=fixed: the order of sessions 20-35 (library first every round), for A/B runs of the bench itself.
  const fixedOrder = process.env.BENCH_MCP_ORDER === 'fixed';
  const perRound: { library: number; v1: number }[] = [];
  // BENCH_MCP_INTERLEAVE (default `call-http`): within a round the four HTTP sides take turns
  // call by call (the turn's first side moving on by one each call), so a burst of the machine's
  // other work lands on each alike: at load 15-19 each round's `/mcp` ÷ `/v1` went 0.93-1.18 so,
  // against 0.18-7.7 with each side's calls in a block (docs/benchmarks.md, session 36). The
  // library's calls go in blocks of BENCH_MCP_SEGMENT (100) between those turns, its client
  // opened before each block and closed after: its event reader reads every completion of the
  // prefix, and left open during the HTTP sides' calls it woke their caller once more each,
  // which on the loaded machine tripled every side's p50 (`call`: all five sides take turns,
  // the library's client open through the round). `block`: each side's calls in one block,
  // the blocks' order turning each round (BENCH_MCP_ORDER=fixed: library first every round, as
  // sessions 20-35 ran it). BENCH_MCP_BURST (1): calls a side makes in a row at its turn.
  const interleave = process.env.BENCH_MCP_INTERLEAVE ?? 'call-http';
  const burst = Number(process.env.BENCH_MCP_BURST ?? 1);
  const segment = interleave === 'call-http' ? Number(process.env.BENCH_MCP_SEGMENT ?? 100) : opts.calls;
  const calls: Record<Side, (i: number) => Promise<void>> = { library: viaLibrary, mcp: viaMcp, mcpFetch: viaMcpFetch, v1: viaV1, v1h: viaV1Http };
  const mainThread = `/proc/${serverPid}/task/${serverPid}/schedstat`;
  const serverNs = () => Number(readFileSync(mainThread, 'utf8').split(' ')[0]);
  /** One round of sides taking turns; each call's caller and server (main thread) CPU charged to its side. */
  const turns = async () => {
    const lat: Record<Side, number[]> = { library: [], mcp: [], mcpFetch: [], v1: [], v1h: [] };
    const n = opts.calls * opts.rounds;
    const one = async (side: Side, i: number) => {
      const c0 = process.cpuUsage();
      const s0 = serverNs();
      const t0 = performance.now();
      await calls[side](i);
      lat[side].push(performance.now() - t0);
      const used = process.cpuUsage(c0);
      cpu[side].caller += (used.user + used.system) / 1000 / n;
      cpu[side].server += (serverNs() - s0) / 1e6 / n;
    };
    const turn = interleave === 'call' ? order : order.filter((s) => s !== 'library');
    for (let from = 0; from < opts.calls; from += segment) {
      const to = Math.min(opts.calls, from + segment);
      library = await openLibrary();
      if (interleave === 'call-http') {
        for (let i = from; i < to; i++) await one('library', i);
        await library.close();
      }
      for (let i = from; i < to; i += burst)
        for (let k = 0; k < turn.length; k++) {
          const side = turn[(i / burst + k) % turn.length]!;
          for (let j = i; j < Math.min(to, i + burst); j++) await one(side, j);
        }
      if (interleave === 'call') await library.close();
    }
    return Object.fromEntries(order.map((s) => [s, summarise(lat[s], lat[s].reduce((a, b) => a + b, 0) / 1000)])) as Record<Side, RunStats>;
  };
  for (let r = 0; r < opts.rounds; r++) {
    const got = {} as Record<Side, RunStats>;
    if (interleave === 'call' || interleave === 'call-http') Object.assign(got, await turns());
    else
      for (let k = 0; k < order.length; k++) {
        const side = order[(fixedOrder ? k : r + k) % order.length]!;
        got[side] = await sides[side]();
      }
    for (const side of order) stats[side].push(got[side]);
    perRound.push({ library: got.mcp.p50Ms / got.library.p50Ms, v1: got.mcp.p50Ms / got.v1.p50Ms });
  }
  const lib = stats.library;
  const over = stats.mcp;
  const overFetch = stats.mcpFetch;
  const v1 = stats.v1;
  const v1h = stats.v1h;
  // The SDK client's fetch keeps its connection alive: the server's sockets are counted
  // (a closed one stays listed for a minute), so a run that opened one per request (and
  // measured TCP set-up rather than agentdb) shows it. Expect 3: Node's fetch (undici) keeps two
  // to one origin even for calls made one at a time (it takes a connection back only after a
  // setImmediate, by then the next call has taken the other one; docs/benchmarks.md, session 23),
  // shared by the SDK client and the fetch sides, and node:http's agent one.
  const connections = serverSockets(Number(new URL(url).port));
  const clientLibraryP50Ms = round(median(lib.map((s) => s.p50Ms)));
  const mcpP50Ms = round(median(over.map((s) => s.p50Ms)));

  await mcp.close();
  const per = (c: { caller: number; server: number }) => ({ caller: round(c.caller), server: round(c.server) });
  return {
    calls: opts.calls,
    rounds: opts.rounds,
    interleave,
    /** What the server's CPU per call counts: its main thread (to the ns) when calls take turns, else the whole process (10 ms ticks). */
    serverCpu: interleave === 'block' ? 'process' : 'main thread',
    clientLibraryP50Ms,
    mcpP50Ms,
    mcpP99Ms: round(median(over.map((s) => s.p99Ms))),
    mcpFetchP50Ms: round(median(overFetch.map((s) => s.p50Ms))),
    v1CallsP50Ms: round(median(v1.map((s) => s.p50Ms))),
    v1HttpP50Ms: round(median(v1h.map((s) => s.p50Ms))),
    p50Ratio: round(mcpP50Ms / clientLibraryP50Ms),
    /** `/mcp` over `/v1/calls` (both from fetch): the second half of issue 28's goal (≤ 1.1). */
    v1Ratio: round(mcpP50Ms / median(v1.map((s) => s.p50Ms))),
    /** The two goals read per round (`/mcp`'s p50 over the library's, over `/v1/calls`', in the same round), median of the rounds. */
    pairedRatio: { library: round(median(perRound.map((p) => p.library))), v1: round(median(perRound.map((p) => p.v1))) },
    /** Each side's p50 (ms) in each round, in the order run (round r starts at side r of library, mcp, mcpFetch, v1, v1h). */
    roundP50Ms: Object.fromEntries(Object.entries(stats).map(([side, s]) => [side, s.map((x) => x.p50Ms)])),
    /** Each round's two ratios, in the order run. */
    roundRatios: perRound.map((p) => [round(p.library), round(p.v1)]),
    httpConnections: connections,
    cpuMsPerCall: { library: per(cpu.library), mcp: per(cpu.mcp), mcpFetch: per(cpu.mcpFetch), v1Calls: per(cpu.v1), v1Http: per(cpu.v1h) },
  };
}

/** The server's TCP sockets on `port` (open, or closed within the last minute), from /proc/net/tcp. */
function serverSockets(port: number): number {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  return (
    readFileSync('/proc/net/tcp', 'utf8')
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(/\s+/))
      // local address is field 1 (ADDR:PORT in hex), state field 3 (0A: listening).
      .filter((f) => f[1]?.endsWith(`:${hexPort}`) && f[3] !== '0A').length
  );
}
