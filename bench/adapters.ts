// `--only adapters`: a PK read through each framework adapter's tool against the bare client (issue 30).
import { RunContext } from '@openai/agents';
import { Redis } from 'ioredis';
import type { Config } from '../src/config.ts';
import { AgentDbClient } from '../src/calls/client.ts';
import { AgentToolset } from '../src/frameworks/agent-toolset.ts';
import { agentDbTools as aiSdkTools } from '../src/frameworks/ai-sdk.ts';
import { agentDbTools as langchainTools } from '../src/frameworks/langchain.ts';
import { agentDbTools as openAiAgentsTools } from '../src/frameworks/openai-agents.ts';
import { keysFor } from '../src/redis/keys.ts';
import { AgentRegistry } from '../src/registry/agents.ts';
import { WorkspaceRegistry } from '../src/registry/workspaces.ts';
import { quantile, round, summarise, drive, type RunStats } from './stats.ts';

type Side = 'client' | 'core' | 'aiSdk' | 'openAiAgents' | 'langchain';
const ADAPTERS = ['core', 'aiSdk', 'openAiAgents', 'langchain'] as const;

/**
 * The same primary-key read, one at a time, through the bare client and through each adapter's
 * tool as its framework invokes one (the AI SDK's `execute`, the Agents SDK's `invoke` with the
 * model's JSON arguments, LangChain's `invoke` with a tool call), in interleaved rounds on one
 * client and the caller's worker. No model: a model's own time would hide what the adapter adds,
 * which is what the ratio is for (goal <= 1.1).
 */
export async function benchAdapters(config: Config, opts: { calls: number; rounds: number }) {
  const redis = new Redis(config.redisUrl);
  const keys = keysFor(config.prefix);
  await new WorkspaceRegistry(redis, keys).put('adapters', 'pro');
  await new AgentRegistry(redis, keys).put('adapters', 'reader', { displayName: 'Reader', settings: { database: 'agent' } });
  redis.disconnect();
  const client = new AgentDbClient({ redisUrl: config.redisUrl, prefix: config.prefix, shardCount: config.shardCount, rateLimits: false });
  const who = { workspace: 'adapters', agent: 'reader' };
  const must = (ok: boolean, what: unknown) => {
    if (!ok) throw new Error(`bench adapters step failed: ${JSON.stringify(what)}`);
  };
  try {
    const settings = { database: 'agent' as const };
    const made = await client.call({
      ...who,
      settings,
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: 'CREATE TABLE IF NOT EXISTS kv (id INTEGER PRIMARY KEY, v TEXT)' },
    });
    must(made.ok, made);
    const filled = await client.call({
      ...who,
      settings,
      tool: 'DATA_WRITE_SQL',
      arguments: {
        sql: "INSERT OR IGNORE INTO kv SELECT value, 'value-' || value FROM json_each(?)",
        params: [JSON.stringify(Array.from({ length: 1000 }, (_, i) => i))],
      },
    });
    must(filled.ok, filled);

    const core = await AgentToolset.open(client, who);
    const ai = await aiSdkTools(client, who);
    const oa = await openAiAgentsTools(client, who);
    const lc = await langchainTools(client, who);
    const oaQuery = oa.tools.find((t) => t.name === 'DATA_QUERY_SQL')!;
    const lcQuery = lc.tools.find((t) => t.name === 'DATA_QUERY_SQL')!;
    const args = (i: number) => ({ sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] });
    const runContext = new RunContext();
    const sides: Record<Side, (i: number) => Promise<void>> = {
      client: async (i) => {
        const env = await client.call({ ...who, settings, tool: 'DATA_QUERY_SQL', arguments: args(i) });
        must(env.ok, env);
      },
      // The adapters' shared core alone (no framework): what is agentdb's own share of each.
      core: async (i) => {
        const started = await core.start('DATA_QUERY_SQL', args(i), `c${i}`);
        must(!started.parked && !started.answer.isError, started);
      },
      aiSdk: async (i) => {
        const out = (await ai.tools.DATA_QUERY_SQL!.execute!(args(i), { toolCallId: `c${i}`, messages: [] } as never)) as { isError: boolean };
        must(!out.isError, out);
      },
      openAiAgents: async (i) => {
        const strict = { ...args(i), max_rows: null, scope: null, agent: null };
        const out = await oaQuery.invoke(runContext, JSON.stringify(strict), {
          toolCall: { type: 'function_call', callId: `c${i}`, name: 'DATA_QUERY_SQL', arguments: JSON.stringify(strict) },
        });
        must(typeof out === 'string' && out.includes('untrusted-data-'), out);
      },
      langchain: async (i) => {
        const out = (await lcQuery.invoke({ type: 'tool_call', id: `c${i}`, name: 'DATA_QUERY_SQL', args: args(i) })) as { content: unknown };
        must(String(out.content).includes('untrusted-data-'), out);
      },
    };
    for (const fn of Object.values(sides)) await drive(Math.min(500, opts.calls), 1, fn);
    const runs: Record<Side, RunStats[]> = { client: [], core: [], aiSdk: [], openAiAgents: [], langchain: [] };
    // CPU per call of this (the caller's) process: on a loaded machine it moves far less than
    // latency does, and it is what an adapter adds (the worker's share is the same on every side).
    const cpuMs: Record<Side, number> = { client: 0, core: 0, aiSdk: 0, openAiAgents: 0, langchain: 0 };
    const order = Object.entries(sides) as [Side, (i: number) => Promise<void>][];
    for (let r = 0; r < opts.rounds; r++) {
      // Each round starts with the next side: no side always follows the same one.
      for (const [side, fn] of [...order.slice(r % order.length), ...order.slice(0, r % order.length)]) {
        const before = process.cpuUsage();
        const d = await drive(opts.calls, 1, fn);
        const used = process.cpuUsage(before);
        cpuMs[side] += (used.user + used.system) / 1000 / (opts.calls * opts.rounds);
        runs[side].push(summarise(d.latencies, d.seconds));
      }
    }
    const median = (xs: number[]) =>
      quantile(
        [...xs].sort((a, b) => a - b),
        0.5,
      );
    const p50 = (side: Side) => round(median(runs[side].map((s) => s.p50Ms)));
    const clientP50Ms = p50('client');
    const adapters = Object.fromEntries(
      ADAPTERS.map((side) => [side, { p50Ms: p50(side), p50Ratio: round(p50(side) / clientP50Ms), cpuMsPerCall: round(cpuMs[side]) }]),
    ) as Record<Exclude<Side, 'client'>, { p50Ms: number; p50Ratio: number; cpuMsPerCall: number }>;
    return { calls: opts.calls, rounds: opts.rounds, clientP50Ms, clientCpuMsPerCall: round(cpuMs.client), ...adapters };
  } finally {
    await client.close();
  }
}

/** The scenario's line. */
export function printAdapters(r: Awaited<ReturnType<typeof benchAdapters>>): void {
  const each = ADAPTERS.map((s) => `${s} ${r[s].p50Ms} ms (ratio ${r[s].p50Ratio}, CPU ${r[s].cpuMsPerCall} ms)`).join(', ');
  console.log(`PK read through the framework adapters' tools: client p50 ${r.clientP50Ms} ms (CPU ${r.clientCpuMsPerCall} ms); ${each}; goal <= 1.1`);
}
