import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Hostile review 18h, finding 3: a call sent as an MCP task and refused QUOTA_EXCEEDED still left a
// task (2.4 KB for 48 h) counted past the budget that refused the call; 340 of them took a
// workspace to almost four times its REDIS_BYTES_PER_WORKSPACE.

const CAP = 1000;
let sb: Sandbox;
let k: KeyedApp;
let client: Client;

beforeAll(async () => {
  sb = sandbox({ REDIS_BYTES_PER_WORKSPACE: String(CAP) });
  await sb.pool();
  k = keyedApp(sb);
  const key = await k.agentKey('tiny', 'flood', { displayName: 'Flood', settings: { database: 'agent' } });
  const base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  client = new Client({ name: 'agentdb-test', version: '1.0.0' }, { capabilities: { tasks: {} } });
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', base), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  await client.listTools();
});
afterAll(async () => {
  await client.close();
  await k.close();
  await sb.cleanup();
});

/** What the workspace holds in Redis, as its budget counts it. */
async function held(): Promise<number> {
  return Number((await k.redis.get(keysFor(sb.config.prefix).redisBudget('tiny').held)) ?? 0);
}

/** The messages of one task-augmented call, by kind. */
async function sendAsTask(sql: string): Promise<{ type: string; text?: string }[]> {
  const out = [];
  for await (const m of client.experimental.tasks.callToolStream({ name: 'DATA_WRITE_SQL', arguments: { sql } }, CallToolResultSchema)) {
    out.push({ type: m.type, ...(m.type === 'error' ? { text: m.error.message } : {}) });
  }
  return out;
}

it('calls refused for the budget get no task: task calls keep the workspace within what its admitted calls hold', async () => {
  // The first call is admitted (the workspace held nothing) and runs: its task is kept.
  expect((await sendAsTask('CREATE TABLE t (x)')).map((m) => m.type)).toEqual(['taskCreated', 'taskStatus', 'result']);
  const after = await held();
  expect(after).toBeGreaterThan(CAP);
  for (let i = 0; i < 20; i++) {
    expect(await sendAsTask(`INSERT INTO t VALUES (${i})`)).toEqual([{ type: 'error', text: expect.stringContaining('QUOTA_EXCEEDED') }]);
  }
  // No task was stored for a refused call, so nothing was added.
  expect(await held()).toBeLessThanOrEqual(after);
  expect(await k.redis.keys(`${sb.config.prefix}:mcp-task:*`)).toHaveLength(1);
});

it('calls refused before they were taken (no rate, no budget asked) get no task: a flood of them stores nothing', async () => {
  const tasksBefore = (await k.redis.keys(`${sb.config.prefix}:mcp-task:*`)).length;
  const before = await held();
  // Session 30, T7: arguments the call's plan refuses (another agent's tables to write), or a
  // call id that is not a string, are refused before any rate or budget is asked; as a task each
  // was kept 48 h, counted past the budget, as fast as the HTTP server answered (20 sends, 20 tasks).
  const refused = async (args: Record<string, unknown>, meta?: Record<string, unknown>) => {
    const out = [];
    const stream = client.experimental.tasks.callToolStream(
      { name: 'DATA_WRITE_SQL', arguments: args, ...(meta ? { _meta: meta } : {}) },
      CallToolResultSchema,
    );
    for await (const m of stream) out.push({ type: m.type, ...(m.type === 'error' ? { text: m.error.message } : {}) });
    return out;
  };
  for (let i = 0; i < 10; i++) {
    expect(await refused({ sql: `INSERT INTO t VALUES (${i})`, scope: 'workspace' })).toEqual([
      { type: 'error', text: expect.stringContaining('NOT_PERMITTED') },
    ]);
  }
  for (let i = 0; i < 10; i++) {
    expect(await refused({ sql: 'INSERT INTO t VALUES (1)' }, { 'agentdb/callId': { n: i } })).toEqual([
      { type: 'error', text: expect.stringContaining('INVALID_ARGUMENTS') },
    ]);
  }
  expect(await k.redis.keys(`${sb.config.prefix}:mcp-task:*`)).toHaveLength(tasksBefore);
  expect(await held()).toBeLessThanOrEqual(before);
});
