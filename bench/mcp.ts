// PK reads through POST /mcp (official SDK client, Streamable HTTP) against the client library.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Redis } from 'ioredis';
import { ApprovalService } from '../src/approvals/approval-service.ts';
import { MemberRegistry } from '../src/approvals/members.ts';
import type { Config } from '../src/config.ts';
import { buildApp } from '../src/http/app.ts';
import { AgentDbClient } from '../src/queue/client.ts';
import { KeyedCalls } from '../src/queue/keyed-calls.ts';
import { keysFor } from '../src/queue/keys.ts';
import { AgentKeyRing } from '../src/registry/agent-keys.ts';
import { AgentRegistry } from '../src/registry/agents.ts';
import { KeyAuthenticator } from '../src/registry/principal.ts';
import { PrincipalCache } from '../src/registry/principal-cache.ts';
import { WorkspaceRegistry } from '../src/registry/workspaces.ts';
import { ownSignalFetch } from './own-signal-fetch.ts';
import { drive, quantile, round, summarise, type RunStats } from './stats.ts';

/**
 * The same primary-key read, one at a time, through the client library and through `/mcp`
 * (the HTTP server runs in this process, as `agentdb start` runs it beside its clients'
 * network hop), in interleaved rounds. The ratio of p50s is what MCP's layers cost: HTTP, the
 * JSON-RPC session per request (stateless: a server and transport per request), key lookup and
 * the untrusted-data fence.
 */
export async function benchMcp(config: Config, opts: { calls: number; rounds: number }) {
  const redis = new Redis(config.redisUrl);
  const keys = keysFor(config.prefix);
  await new WorkspaceRegistry(redis, keys).put('mcpbench', 'pro');
  const agents = new AgentRegistry(redis, keys);
  await agents.put('mcpbench', 'reader', { displayName: 'Reader', settings: { database: 'agent' } });
  const { key } = await new AgentKeyRing(redis, keys, agents).mint('mcpbench', 'reader');
  const members = new MemberRegistry(redis, keys);
  const approvals = new ApprovalService({ redis, prefix: config.prefix, shardCount: config.shardCount, members });
  const serverClient = new AgentDbClient({ redisUrl: config.redisUrl, prefix: config.prefix, shardCount: config.shardCount });
  // As `agentdb start` runs it: who a key is, cached until the registry announces a change.
  const principals = new PrincipalCache(new Redis(config.redisUrl), keys.registryChanges, config.keyCacheTtlMs);
  await principals.start();
  const app = buildApp({
    redis,
    shardCount: config.shardCount,
    members,
    approvals,
    keyed: { auth: new KeyAuthenticator(redis, keys, principals), calls: new KeyedCalls(serverClient), waitMs: 30_000, approvalWaitMs: 60_000 },
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  // The SDK client's fetch keeps its connection alive: counted, so a run that opened one per
  // request (and measured TCP set-up rather than agentdb) shows it.
  let connections = 0;
  app.server.on('connection', () => connections++);
  const mcp = new Client({ name: 'bench', version: '1' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers: { authorization: `Bearer ${key}` } }, fetch: ownSignalFetch }));
  const library = new AgentDbClient({ redisUrl: config.redisUrl, prefix: config.prefix, shardCount: config.shardCount });

  const who = { workspace: 'mcpbench', agent: 'reader', settings: { database: 'agent' as const } };
  const must = (ok: boolean, what: unknown) => {
    if (!ok) throw new Error(`bench mcp step failed: ${JSON.stringify(what)}`);
  };
  const made = await library.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE IF NOT EXISTS kv (id INTEGER PRIMARY KEY, v TEXT)' } });
  must(made.ok, made);
  const filled = await library.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: "INSERT OR IGNORE INTO kv SELECT value, 'value-' || value FROM json_each(?)", params: [JSON.stringify(Array.from({ length: 1000 }, (_, i) => i))] } });
  must(filled.ok, filled);

  const viaLibrary = async (i: number) => {
    const env = await library.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] } });
    must(env.ok, env);
  };
  const viaMcp = async (i: number) => {
    const r = await mcp.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] } });
    must(r.isError === false, r);
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
  for (const warm of [viaLibrary, viaMcp, viaV1]) await drive(Math.min(500, opts.calls), 1, warm);

  const lib: RunStats[] = [];
  const over: RunStats[] = [];
  const v1: RunStats[] = [];
  // CPU of this process (the caller, and for /mcp and /v1 also the HTTP server) per call: on a
  // shared machine it moves far less than latency does, and it is what the layers cost.
  const cpu = { library: 0, mcp: 0, v1: 0 };
  const measured = async (side: keyof typeof cpu, fn: (i: number) => Promise<void>) => {
    const before = process.cpuUsage();
    const d = await drive(opts.calls, 1, fn);
    const used = process.cpuUsage(before);
    cpu[side] += (used.user + used.system) / 1000 / (opts.calls * opts.rounds);
    return summarise(d.latencies, d.seconds);
  };
  for (let r = 0; r < opts.rounds; r++) {
    lib.push(await measured('library', viaLibrary));
    over.push(await measured('mcp', viaMcp));
    v1.push(await measured('v1', viaV1));
  }
  const median = (xs: number[]) => quantile([...xs].sort((a, b) => a - b), 0.5);
  const clientLibraryP50Ms = round(median(lib.map((s) => s.p50Ms)));
  const mcpP50Ms = round(median(over.map((s) => s.p50Ms)));

  await mcp.close();
  await app.close();
  principals.close();
  await approvals.close();
  await serverClient.close();
  await library.close();
  redis.disconnect();
  return {
    calls: opts.calls,
    rounds: opts.rounds,
    clientLibraryP50Ms,
    mcpP50Ms,
    mcpP99Ms: round(median(over.map((s) => s.p99Ms))),
    v1CallsP50Ms: round(median(v1.map((s) => s.p50Ms))),
    p50Ratio: round(mcpP50Ms / clientLibraryP50Ms),
    httpConnections: connections,
    cpuMsPerCall: { library: round(cpu.library), mcp: round(cpu.mcp), v1Calls: round(cpu.v1) },
  };
}
