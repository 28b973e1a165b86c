// What one stateless /mcp tools/call costs in agentdb's own MCP layers, in process, with no HTTP
// and no queue: the per-request server, its connection to the exchange, the SDK's dispatch and
// the result, a stub keyed call behind it; and the same call down the fast path that skips them
// (src/http/mcp-fast-call.ts). CPU µs per call (process.cpuUsage), which a loaded machine moves
// far less than a latency, and wall µs (no timer or sleep is in the path: the two stay close on a
// quiet machine). Run: `node --import tsx bench/mcp-layers.ts` (BENCH_SEQ_CALLS; BENCH_DISTS
// to compare builds, below). Not part of `npm run bench`: it explains bench/mcp.ts's /mcp-over-/v1
// share.
import { getHeapStatistics } from 'node:v8';
import { mcpServer } from '../src/mcp/server.ts';
import { McpExchange } from '../src/http/mcp-exchange.ts';
import { answerFastToolCall, fastToolCall } from '../src/http/mcp-fast-call.ts';
import { mcpToolCall } from '../src/mcp/tool-call.ts';
import type { KeyedCalls } from '../src/calls/bearer-key-calls.ts';
import type { Principal } from '../src/registry/principal.ts';

const CALLS = Number(process.env.BENCH_SEQ_CALLS ?? 20_000);
const principal = {
  kind: 'agent',
  workspace: 'floor',
  agent: 'reader',
  keyId: 'k',
  settings: { database: 'agent' },
  surface: { kind: 'data' },
} as unknown as Principal;
const envelope = () => ({
  ok: true,
  callId: '00000000-0000-4000-8000-000000000000',
  tool: 'DATA_QUERY_SQL',
  credits: 1,
  result: { columns: ['v'], rows: [['value-1']], truncated: false },
});
const calls = { call: async () => envelope() } as unknown as KeyedCalls;
const headers = { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2025-06-18' };
const body = (i: number) => ({
  jsonrpc: '2.0',
  id: i,
  method: 'tools/call',
  params: { name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] } },
});

async function one(i: number): Promise<void> {
  const server = mcpServer(principal, { kind: 'workspace' }, { calls, approvalWaitMs: 1000 });
  const exchange = new McpExchange();
  await server.connect(exchange);
  const answer = await exchange.handle({ headers, body: body(i) });
  if (answer.status !== 200) throw new Error(JSON.stringify(answer));
  JSON.stringify(answer.body);
}

/** The same call down `/mcp`'s fast path (src/http/mcp-fast-call.ts): no SDK Server, no exchange. */
async function fast(i: number): Promise<void> {
  const call = fastToolCall({ headers, body: body(i) });
  if (!call || 'invalid' in call) throw new Error('not taken by the fast path');
  const run = mcpToolCall({ kind: 'workspace' }, { calls, approvalWaitMs: 1000 }, async () => principal);
  const answer = await answerFastToolCall(call, run, new AbortController().signal);
  if (answer.status !== 200) throw new Error(JSON.stringify(answer));
  JSON.stringify(answer.body);
}

const median = (xs: number[]) => Math.round([...xs].sort((a, b) => a - b)[2]! * 10) / 10;
/** CPU and wall µs per call of `path`, the median of 5 rounds. */
async function measure(path: (i: number) => Promise<void>) {
  for (let i = 0; i < 2000; i++) await path(i);
  const cpu: number[] = [];
  const wall: number[] = [];
  for (let r = 0; r < 5; r++) {
    const before = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < CALLS; i++) await path(i);
    const used = process.cpuUsage(before);
    wall.push(((performance.now() - t0) * 1000) / CALLS);
    cpu.push((used.user + used.system) / CALLS);
  }
  return { cpuUsPerCall: median(cpu), wallUsPerCall: median(wall) };
}
/**
 * `BENCH_DISTS=<dist>,<dist>`: the fast path of each build instead, rounds alternated in one
 * process, with the bytes each call allocates (run with --expose-gc for those): how a change to
 * the path is measured against the build before it on a machine too busy for whole calls to show.
 */
async function compareBuilds(dists: string[]): Promise<void> {
  const paths: ((i: number) => Promise<void>)[] = [];
  for (const dist of dists) {
    const built = (file: string) => import(new URL(`${dist}/src/${file}.js`, `file://${process.cwd()}/`).href);
    const { answerFastToolCall: answer, fastToolCall: take } = await built('http/mcp-fast-call');
    const { mcpToolCall: handler } = await built('mcp/tool-call');
    paths.push(async (i) => {
      const call = take({ headers, body: body(i) });
      const run = handler({ kind: 'workspace' }, { calls, approvalWaitMs: 1000 }, async () => principal);
      const a = await answer(call, run, new AbortController().signal);
      if (a.status !== 200) throw new Error(JSON.stringify(a));
      JSON.stringify(a.body);
    });
  }
  const gc = (globalThis as { gc?: () => void }).gc;
  // Bytes allocated per call: the heap's growth over 2000 calls from a collected heap (with a
  // young generation large enough that nothing is collected in between).
  const allocated = async (path: (i: number) => Promise<void>) => {
    if (!gc) return Number.NaN;
    gc();
    const before = getHeapStatistics().used_heap_size;
    for (let i = 0; i < 2000; i++) await path(i);
    return (getHeapStatistics().used_heap_size - before) / 2000;
  };
  const cpu: number[][] = dists.map(() => []);
  const bytes: number[][] = dists.map(() => []);
  for (const path of paths) for (let i = 0; i < 2000; i++) await path(i);
  for (let r = 0; r < 10; r++) {
    for (let k = 0; k < paths.length; k++) {
      const j = r % 2 ? paths.length - 1 - k : k;
      const before = process.cpuUsage();
      for (let i = 0; i < CALLS; i++) await paths[j]!(i);
      const used = process.cpuUsage(before);
      cpu[j]!.push((used.user + used.system) / CALLS);
      bytes[j]!.push(await allocated(paths[j]!));
    }
  }
  const mid = (xs: number[]) => Math.round([...xs].sort((a, b) => a - b)[5]! * 10) / 10;
  console.log(
    JSON.stringify({
      calls: CALLS,
      rounds: 10,
      fastPath: dists.map((dist, j) => ({ dist, cpuUsPerCall: mid(cpu[j]!), bytesPerCall: Math.round(mid(bytes[j]!)) })),
    }),
  );
}

if (process.env.BENCH_DISTS) await compareBuilds(process.env.BENCH_DISTS.split(','));
else console.log(JSON.stringify({ calls: CALLS, sdkPath: await measure(one), fastPath: await measure(fast) }));
