// `node --expose-gc --import tsx bench/caller-retained.ts [a/src/calls/client.ts]`: what a caller
// keeps of each sequential PK read once it is answered, after a full collection, over rounds of
// CALLS (default 3000) reads against an `agentdb worker` (this checkout's dist/). A client that
// keeps nothing shows a few bytes either way; session 25 found ~1.1 KB a read held until the
// client closed (the event reader's race against a promise of its life, docs/benchmarks.md).
// `MCP=1` reads through the keyed-call core and the `/mcp` tool handler instead, as `agentdb
// start` serves them (the module is then `<src>/calls/client.ts` of a checkout: its siblings are
// imported from it).
import path from 'node:path';
import { benchSite } from './agentdb-worker.ts';
import { pkReadTable } from './pk-read.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const CALLS = Number(process.env.CALLS ?? 3000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('caller-retained: run node with --expose-gc');
const mod = path.resolve(process.argv[2] ?? new URL('../src/calls/client.ts', import.meta.url).pathname);
const src = path.dirname(path.dirname(mod));

const site = benchSite(REDIS_URL, 'retained', { WORKER_CONCURRENCY: '32', LOG_LEVEL: 'silent' });
await site.worker();
const { AgentDbClient } = await import(mod);
const client = new AgentDbClient({ redisUrl: REDIS_URL, prefix: site.config.prefix, shardCount: site.config.shardCount, rateLimits: false });
try {
  let read = await pkReadTable(client);
  if (process.env.MCP === '1') {
    const { KeyedCalls } = await import(path.join(src, 'calls/bearer-key-calls.ts'));
    const { mcpToolCall } = await import(path.join(src, 'mcp/tool-call.ts'));
    const keyed = new KeyedCalls(client);
    const principal = { kind: 'agent', workspace: 'bench', agent: 'reader', keyId: 'k1', settings: { database: 'agent' }, surface: { kind: 'data' } };
    read = async (i) => {
      const run = mcpToolCall({ kind: 'workspace' }, { calls: keyed, approvalWaitMs: 30_000 }, async () => principal);
      const args = { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] };
      const r = await run(
        { method: 'tools/call', params: { name: 'DATA_QUERY_SQL', arguments: args } },
        { signal: new AbortController().signal, requestId: i },
      );
      if (r.isError) throw new Error(`caller-retained: ${JSON.stringify(r)}`);
    };
  }
  for (let i = 0; i < 1000; i++) await read(i);
  const heap = () => {
    gc();
    gc();
    return process.memoryUsage().heapUsed;
  };
  let before = heap();
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < CALLS; i++) await read(i);
    const after = heap();
    console.log(
      `${path.relative(process.cwd(), mod)}${process.env.MCP === '1' ? ' (MCP)' : ''}: kept ${((after - before) / CALLS).toFixed(0)} bytes per read over ${CALLS} reads`,
    );
    before = after;
  }
} finally {
  await client.close();
  await site.close();
}
