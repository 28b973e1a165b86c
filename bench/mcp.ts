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
 * Set up as people run it: the server is the built CLI, and every caller is in this process, as
 * a user's MCP client and a user's runtime with the client library are processes of their own.
 * Each layout (BENCH_MCP_LAYOUTS, default `one`; `one,split` for both) is a server of its own,
 * on a prefix and data folder of its own, measured in the same rounds as the other, its calls
 * taking turns with the other's. Both in one run wake each server from idle for every call (the
 * other's call between): the one-process figures read 2.16 ÷ library and 1.27 ÷ `/v1/calls` so,
 * against 1.78-1.84 and 1.08-1.10 alone, same build, same minutes (session 38, lead); so the
 * figures of record are the one layout's alone, and `split` is a run of its own to compare.
 * - `one`: `agentdb start`, HTTP and every shard worker in one process (`npm start`);
 * - `split`: `agentdb start --http-only` beside an `agentdb worker` that owns every shard (the
 *   HTTP process's thread then serves requests only; session 38, M5).
 * In both, the library enqueues onto Redis for the workers that own the shard, and the HTTP
 * sides post to the HTTP endpoint, which enqueues the same call for the same workers.
 */
export async function benchMcp(config: Config, opts: { calls: number; rounds: number }) {
  const layouts = (process.env.BENCH_MCP_LAYOUTS ?? 'one').split(',') as Layout[];
  for (const l of layouts) if (l !== 'one' && l !== 'split') throw new Error(`bench mcp: no layout ${JSON.stringify(l)} (one, split)`);
  const servers: Server[] = [];
  try {
    for (const layout of layouts) servers.push(await startServer(config, layout));
    const byLayout = await measure(config, servers, opts);
    const first = byLayout[layouts[0]!]!;
    // The first layout's figures at the top (what earlier runs reported), every layout's under `layouts`.
    return { ...first, layouts: byLayout };
  } finally {
    for (const s of servers) await s.stop();
  }
}

type Layout = 'one' | 'split';

/** One layout's server: where to call it, with which key, and the processes whose main threads serve it. */
interface Server {
  layout: Layout;
  prefix: string;
  url: string;
  key: string;
  pids: number[];
  stop: () => Promise<void>;
}

async function startServer(config: Config, layout: Layout): Promise<Server> {
  // A prefix and data folder of its own: the caller's workers, and the other layout's, must not take this server's calls.
  const prefix = `${config.prefix}-mcp-${layout}`;
  const dataDir = path.join(config.dataDir, `mcp-${layout}`);
  mkdirSync(dataDir, { recursive: true });
  const redis = new Redis(config.redisUrl);
  const keys = keysFor(prefix);
  await new WorkspaceRegistry(redis, keys).put('mcpbench', 'pro');
  const agents = new AgentRegistry(redis, keys);
  await agents.put('mcpbench', 'reader', { displayName: 'Reader', settings: { database: 'agent' } });
  const { key } = await new AgentKeyRing(redis, keys, agents).mint('mcpbench', 'reader');
  redis.disconnect();
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
  // The worker first, so that its shards are owned before the HTTP process asks /ready-like questions.
  const worker = layout === 'split' ? (await startProcess(process.execPath, [BIN, 'worker'], env, /"msg":"worker ready"/)).child : undefined;
  const args = layout === 'split' ? [BIN, 'start', '--http-only'] : [BIN, 'start'];
  const { child, output } = await startProcess(process.execPath, args, env, /"msg":"agentdb ready"/);
  const stop = async () => {
    await stopProcess(child);
    if (worker) await stopProcess(worker);
  };
  const url = /"address":"([^"]+)"/.exec(output)?.[1];
  if (!url) {
    await stop();
    throw new Error(`bench mcp: no address in agentdb start's output: ${output}`);
  }
  return { layout, prefix, url, key, pids: [child.pid!, ...(worker ? [worker.pid!] : [])], stop };
}

type Side = 'library' | 'mcp' | 'mcpFetch' | 'v1' | 'v1h';
const ORDER: Side[] = ['library', 'mcp', 'mcpFetch', 'v1', 'v1h'];
const HTTP_SIDES = ORDER.filter((s) => s !== 'library');

/** One server's five ways to make the read, each `(i) => Promise<void>`, and its library client opened and closed. */
async function sidesFor(config: Config, server: Server) {
  const { url, key, prefix } = server;
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
  // A client library's event reader reads every completion of the prefix while anyone in its
  // client waits: one that stayed open would charge this (the MCP client's) process for reading
  // the server's events, which a user's MCP client never does. So each library block has a
  // client of its own, opened (and its reader started) before the block and closed after.
  let library: AgentDbClient | undefined;
  const openLibrary = async () => {
    library = new AgentDbClient({ redisUrl: config.redisUrl, prefix, shardCount: config.shardCount, rateLimits: false });
    const env = await library.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } });
    must(env.ok, env);
  };
  const closeLibrary = async () => {
    await library?.close();
    library = undefined;
  };
  await openLibrary();
  const made = await library!.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE IF NOT EXISTS kv (id INTEGER PRIMARY KEY, v TEXT)' } });
  must(made.ok, made);
  const filled = await library!.call({
    ...who,
    tool: 'DATA_WRITE_SQL',
    arguments: {
      sql: "INSERT OR IGNORE INTO kv SELECT value, 'value-' || value FROM json_each(?)",
      params: [JSON.stringify(Array.from({ length: 1000 }, (_, i) => i))],
    },
  });
  must(filled.ok, filled);

  const viaLibrary = async (i: number) => {
    const env = await library!.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] } });
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
  const calls: Record<Side, (i: number) => Promise<void>> = { library: viaLibrary, mcp: viaMcp, mcpFetch: viaMcpFetch, v1: viaV1, v1h: viaV1Http };
  const close = async () => {
    await closeLibrary();
    await mcp.close();
    agent.destroy();
  };
  return { calls, openLibrary, closeLibrary, close };
}

async function measure(config: Config, servers: Server[], opts: { calls: number; rounds: number }) {
  const each = [];
  for (const server of servers) each.push({ server, ...(await sidesFor(config, server)) });
  try {
    // Every side of every layout warmed alike (BENCH_MCP_WARM_CALLS, default 3,000 each; 500
    // before session 33): the server process has the most code to compile (Fastify, the routes,
    // the worker), and V8 goes on compiling hot paths for tens of seconds (session 31, P7); a
    // service runs warm.
    const warmCalls = Number(process.env.BENCH_MCP_WARM_CALLS ?? 3000);
    for (const t of each) {
      for (const side of ORDER) await drive(warmCalls, 1, t.calls[side]);
      await t.closeLibrary();
    }
    return await rounds(each, opts);
  } finally {
    for (const t of each) await t.close();
  }
}

type Target = { server: Server } & Awaited<ReturnType<typeof sidesFor>>;

/**
 * The rounds. Within a round every layout's four HTTP sides take turns call by call (the turn's
 * first moving on by one each call), so a burst of the machine's other work lands on each alike:
 * at load 15-19 each round's `/mcp` ÷ `/v1` went 0.93-1.18 so, against 0.18-7.7 with each side's
 * calls in a block (docs/benchmarks.md, session 36). The library's calls go in blocks of
 * BENCH_MCP_SEGMENT (100) between those turns, each layout's in turn, its client opened before
 * each block and closed after: its event reader, left open during the HTTP sides' calls, woke
 * their caller once more each. BENCH_MCP_BURST (1): calls a side makes in a row at its turn.
 * Each call's caller CPU and its server's main threads' CPU (schedstat, to the ns: the HTTP
 * process's, and in `split` the worker's too) are charged to its side.
 */
async function rounds(each: Target[], opts: { calls: number; rounds: number }) {
  const burst = Number(process.env.BENCH_MCP_BURST ?? 1);
  const segment = Number(process.env.BENCH_MCP_SEGMENT ?? 100);
  const n = opts.calls * opts.rounds;
  const zero = () => Object.fromEntries(ORDER.map((s) => [s, { caller: 0, server: 0 }])) as Record<Side, { caller: number; server: number }>;
  const cpu = each.map(zero);
  const stats = each.map(() => Object.fromEntries(ORDER.map((s) => [s, [] as RunStats[]])) as Record<Side, RunStats[]>);
  const perRound = each.map(() => [] as { library: number; v1: number }[]);
  const threads = each.map((t) => t.server.pids.map((p) => `/proc/${p}/task/${p}/schedstat`));
  const serverNs = (k: number) => threads[k]!.reduce((a, f) => a + Number(readFileSync(f, 'utf8').split(' ')[0]), 0);
  // Every layout's HTTP sides in one turn: [layout index, side].
  const turn = each.flatMap((_, k) => HTTP_SIDES.map((side) => [k, side] as const));
  for (let r = 0; r < opts.rounds; r++) {
    const lat = each.map(() => Object.fromEntries(ORDER.map((s) => [s, [] as number[]])) as Record<Side, number[]>);
    const one = async (k: number, side: Side, i: number) => {
      const c0 = process.cpuUsage();
      const s0 = serverNs(k);
      const t0 = performance.now();
      await each[k]!.calls[side](i);
      lat[k]![side].push(performance.now() - t0);
      const used = process.cpuUsage(c0);
      cpu[k]![side].caller += (used.user + used.system) / 1000 / n;
      cpu[k]![side].server += (serverNs(k) - s0) / 1e6 / n;
    };
    for (let from = 0, seg = 0; from < opts.calls; from += segment, seg++) {
      const to = Math.min(opts.calls, from + segment);
      // The layouts' library blocks in turn, the first moving on by one each segment.
      for (let j = 0; j < each.length; j++) {
        const k = (seg + j) % each.length;
        await each[k]!.openLibrary();
        for (let i = from; i < to; i++) await one(k, 'library', i);
        await each[k]!.closeLibrary();
      }
      for (let i = from; i < to; i += burst)
        for (let j = 0; j < turn.length; j++) {
          const [k, side] = turn[(i / burst + j) % turn.length]!;
          for (let c = i; c < Math.min(to, i + burst); c++) await one(k, side, c);
        }
    }
    each.forEach((_, k) => {
      const got = Object.fromEntries(ORDER.map((s) => [s, summarise(lat[k]![s], lat[k]![s].reduce((a, b) => a + b, 0) / 1000)])) as Record<Side, RunStats>;
      for (const side of ORDER) stats[k]![side].push(got[side]);
      perRound[k]!.push({ library: got.mcp.p50Ms / got.library.p50Ms, v1: got.mcp.p50Ms / got.v1.p50Ms });
    });
  }
  const per = (c: { caller: number; server: number }) => ({ caller: round(c.caller), server: round(c.server) });
  const out: Partial<Record<Layout, ReturnType<typeof report>>> = {};
  const report = (k: number) => {
    const s = stats[k]!;
    const p50 = (side: Side) => median(s[side].map((x) => x.p50Ms));
    const c = cpu[k]!;
    return {
      calls: opts.calls,
      rounds: opts.rounds,
      layout: each[k]!.server.layout,
      /** What the server's CPU per call counts: the main threads (to the ns) of its processes (HTTP, and the worker's in `split`). */
      serverCpu: 'main threads',
      clientLibraryP50Ms: round(p50('library')),
      mcpP50Ms: round(p50('mcp')),
      mcpP99Ms: round(median(s.mcp.map((x) => x.p99Ms))),
      mcpFetchP50Ms: round(p50('mcpFetch')),
      v1CallsP50Ms: round(p50('v1')),
      v1HttpP50Ms: round(p50('v1h')),
      p50Ratio: round(p50('mcp') / p50('library')),
      /** `/mcp` over `/v1/calls` (both from fetch): the second half of issue 28's goal (≤ 1.1). */
      v1Ratio: round(p50('mcp') / p50('v1')),
      /** The two goals read per round (`/mcp`'s p50 over the library's, over `/v1/calls`', in the same round), median of the rounds. */
      pairedRatio: { library: round(median(perRound[k]!.map((p) => p.library))), v1: round(median(perRound[k]!.map((p) => p.v1))) },
      /** Each side's p50 (ms) in each round. */
      roundP50Ms: Object.fromEntries(ORDER.map((side) => [side, s[side].map((x) => x.p50Ms)])),
      /** Each round's two ratios, in the order run. */
      roundRatios: perRound[k]!.map((p) => [round(p.library), round(p.v1)]),
      // The SDK client's fetch keeps its connection alive: the server's sockets are counted
      // (a closed one stays listed for a minute), so a run that opened one per request (and
      // measured TCP set-up rather than agentdb) shows it. Expect 3: Node's fetch (undici) keeps
      // two to one origin even for calls made one at a time (session 23), shared by the SDK
      // client and the fetch sides, and node:http's agent one.
      httpConnections: serverSockets(Number(new URL(each[k]!.server.url).port)),
      cpuMsPerCall: { library: per(c.library), mcp: per(c.mcp), mcpFetch: per(c.mcpFetch), v1Calls: per(c.v1), v1Http: per(c.v1h) },
    };
  };
  each.forEach((t, k) => {
    out[t.server.layout] = report(k);
  });
  return out;
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
