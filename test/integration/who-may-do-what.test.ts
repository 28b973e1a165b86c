import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentSettingsInput } from '../../src/contracts/settings.ts';
import type { CallAnswer } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

/**
 * Every cell of DESIGN.md "Who may do what", for every caller, through every entry point: the
 * client library (a runtime passing settings, or calling for a member), `/v1/calls` and `/mcp`
 * (an agent or member key). `ok` ran, `parked` waits for a person, otherwise the refusal's
 * code. Over MCP an agent whose database is off has no tools at all: its calls are UNKNOWN_TOOL.
 */
let sb: Sandbox;
let k: KeyedApp;
const WS = 'table';

type Who = { name: string; settings?: AgentSettingsInput; role?: 'member' | 'admin' };
const callers: Who[] = [
  { name: 'off', settings: { database: 'off' } },
  { name: 'own', settings: { database: 'agent' } },
  { name: 'shared', settings: { database: 'workspace' } },
  { name: 'granted', settings: { database: 'workspace', sharedData: true } },
  { name: 'bob', role: 'member' },
  { name: 'ada', role: 'admin' },
];
type Where = 'default' | 'own' | 'shared' | 'other';
const targets: Record<Where, Record<string, unknown>> = { default: {}, own: { scope: 'agent' }, shared: { scope: 'workspace' }, other: { agent: 'keeper' } };
type Tool = 'read' | 'write' | 'drop';

const NP = 'NOT_PERMITTED';
/** The table itself: caller → where → [read, write, drop]. */
const expected: Record<string, Record<Where, [string, string, string]>> = {
  off: {
    default: ['DATABASE_OFF', 'DATABASE_OFF', 'DATABASE_OFF'],
    own: ['DATABASE_OFF', 'DATABASE_OFF', 'DATABASE_OFF'],
    shared: ['DATABASE_OFF', 'DATABASE_OFF', 'DATABASE_OFF'],
    other: ['DATABASE_OFF', 'DATABASE_OFF', 'DATABASE_OFF'],
  },
  own: { default: ['ok', 'ok', 'parked'], own: ['ok', 'ok', 'parked'], shared: [NP, NP, NP], other: [NP, NP, NP] },
  shared: { default: ['ok', 'ok', 'parked'], own: ['ok', 'ok', 'parked'], shared: ['ok', NP, NP], other: [NP, NP, NP] },
  granted: { default: ['ok', 'ok', 'parked'], own: ['ok', 'ok', 'parked'], shared: ['ok', 'ok', 'parked'], other: ['ok', NP, NP] },
  bob: { default: ['ok', 'ok', NP], own: [NP, NP, NP], shared: ['ok', 'ok', NP], other: ['ok', NP, NP] },
  ada: { default: ['ok', 'ok', 'ok'], own: [NP, NP, NP], shared: ['ok', 'ok', 'ok'], other: ['ok', NP, NP] },
};

/** What the reason of each refusal must name: the rule, so the caller knows what to change. */
const RULES =
  /\. Rule "(an agent's own tables are never written or dropped by anyone else|another agent's tables are read only, with the shared-data grant|the shared tables need database: workspace|shared writes and drops need the shared-data grant|a client has no database of its own|a drop from a client takes an admin)"/;

const keys: Record<string, string> = {};
const mcpClients: Record<string, Client> = {};
let counter = 0;

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  // A parked MCP call answers "pending" at once rather than waiting for a person.
  // Long enough for a call to run or park under load: a wait that ends first answers the call's
  // status (queued, running), which would leave a cell unjudged. Each parked /mcp cell waits it out.
  k = keyedApp(sb, { approvalWaitMs: 1500 });
  for (const c of callers) {
    keys[c.name] = c.role ? await k.memberKey(WS, c.name, c.role) : await k.agentKey(WS, c.name, { displayName: c.name, settings: c.settings! });
  }
  const base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  for (const c of callers) {
    const client = new Client({ name: 'table', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', base), { requestInit: { headers: { authorization: `Bearer ${keys[c.name]}` } } }));
    mcpClients[c.name] = client;
  }
});
afterAll(async () => {
  await Promise.all(Object.values(mcpClients).map((c) => c.close()));
  await k.close();
  await sb.cleanup();
});

/** Creates table `name` in the database a cell's drop would reach, so the drop is not refused as unknown. */
async function seed(who: Who, where: Where, name: string): Promise<void> {
  const sql = `CREATE TABLE IF NOT EXISTS ${name} (x)`;
  const db =
    where === 'other'
      ? { agent: 'keeper', arguments: {} }
      : where === 'shared' || (who.role && where === 'default')
        ? { agent: 'seeder', arguments: { scope: 'workspace' } }
        : { agent: who.name, arguments: {} };
  const answer = await k.client.call({
    workspace: WS,
    agent: db.agent,
    settings: { database: 'workspace', sharedData: true },
    tool: 'DATA_WRITE_SQL',
    arguments: { sql, ...db.arguments },
  });
  expect(answer).toMatchObject({ ok: true });
}

function argsFor(tool: Tool, where: Where, table: string): { tool: string; arguments: Record<string, unknown> } {
  const target = targets[where];
  if (tool === 'read') return { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1 AS one', ...target } };
  if (tool === 'write') return { tool: 'DATA_WRITE_SQL', arguments: { sql: `CREATE TABLE IF NOT EXISTS w_${table} (x)`, ...target } };
  return { tool: 'DATA_DROP_TABLE', arguments: { table, ...target } };
}

function outcome(answer: CallAnswer): string {
  if (answer.status !== undefined) return answer.status === 'awaiting_approval' ? 'parked' : answer.status;
  if (answer.ok) return 'ok';
  if (answer.error.code === NP) expect(answer.error.message).toMatch(RULES);
  return answer.error.code;
}

const cells = callers.flatMap((c) =>
  (Object.keys(targets) as Where[]).flatMap((w) => (['read', 'write', 'drop'] as Tool[]).map((t, i) => [c, w, t, expected[c.name]![w][i]!] as const)),
);

type McpResult = { structuredContent?: { status?: string; error?: { code: string; message: string } }; content: { text: string }[]; isError?: boolean };

function mcpOutcome(r: McpResult): string {
  // A call still queued or running is no outcome: it answers its status, never 'ok' unrun.
  const status = r.structuredContent?.status;
  if (status !== undefined) return status === 'awaiting_approval' ? 'parked' : status;
  if (!r.isError) return 'ok';
  const code = r.structuredContent!.error!.code;
  if (code === NP) {
    // The text carries the message inside the untrusted-data fence, as JSON; the rule reads
    // the same in structuredContent.
    expect(r.structuredContent!.error!.message).toMatch(RULES);
    expect(r.content[0]!.text).toContain(JSON.stringify(r.structuredContent!.error!.message));
  }
  return code;
}

describe.each(['client library', '/v1/calls', '/mcp'] as const)('who may do what, through %s', (via) => {
  it.each(
    cells.map(
      ([c, w, t, e]) =>
        [
          `${c.name} ${t} ${w} → ${via === '/mcp' && c.name === 'off' ? 'UNKNOWN_TOOL' : e}`,
          c,
          w,
          t,
          via === '/mcp' && c.name === 'off' ? 'UNKNOWN_TOOL' : e,
        ] as const,
    ),
  )('%s', async (_label, who, where, tool, want) => {
    const table = `t${++counter}_${via === '/v1/calls' ? 'h' : via === '/mcp' ? 'm' : 'c'}`;
    if (tool === 'drop' && want !== NP && want !== 'DATABASE_OFF' && want !== 'UNKNOWN_TOOL') await seed(who, where, table);
    const call = argsFor(tool, where, table);
    let answer: CallAnswer;
    if (via === 'client library') {
      const input = who.role
        ? { workspace: WS, agent: `@${who.name}`, member: { name: who.name, role: who.role }, ...call }
        : { workspace: WS, agent: who.name, settings: who.settings!, ...call };
      answer = await k.client.call(input, { wait: false });
    } else if (via === '/mcp') {
      // A tool not listed (an agent whose database is off has none) is a protocol error, -32602.
      const r = await mcpClients[who.name]!.callTool({ name: call.tool, arguments: call.arguments }).then(
        (x) => x as McpResult,
        (err: { code?: number }) => (err.code === -32602 ? undefined : Promise.reject(err)),
      );
      expect(r ? mcpOutcome(r) : 'UNKNOWN_TOOL').toBe(want);
      return;
    } else {
      const r = await k.app.inject({ method: 'POST', url: '/v1/calls?wait=false', headers: { authorization: `Bearer ${keys[who.name]}` }, payload: call });
      answer = r.json() as CallAnswer;
    }
    expect(outcome(answer)).toBe(want);
  });
});
