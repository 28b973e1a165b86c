import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Session 31, H6: which refusals make an MCP task was a list of codes of its own (`keepsNothing`)
// that disagreed with /v1/calls: IDEMPOTENCY_CONFLICT (a 409 on /v1, the request refused) made a
// task, which took the place of the first call's own task under the id (its task id then answered
// as no task), while the disk quota's QUOTA_EXCEEDED (a 200 envelope on /v1, the call's outcome)
// made none. Now one rule, the registry's `refusesTheRequest`: a refusal of the request is answered
// at once, the call's own outcome is a task.

let sb: Sandbox;
let k: KeyedApp;
let base: string;
const clients: Client[] = [];

beforeAll(async () => {
  sb = sandbox({ WORKSPACE_MAX_BYTES: '1000000' });
  await sb.pool(undefined, {}, { writesVerdictKeepMs: 0 });
  k = keyedApp(sb);
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
}, 60_000);
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await k?.close();
  await sb?.cleanup();
});

async function connect(workspace: string): Promise<Client> {
  const key = await k.agentKey(workspace, 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
  const client = new Client({ name: 'agentdb-test', version: '1.0.0' }, { capabilities: { tasks: {} } });
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', base), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  await client.listTools();
  clients.push(client);
  return client;
}

type Message = { type: string; taskId?: string; text?: string; result?: { isError?: boolean; structuredContent?: Record<string, unknown> } };

/** The messages of one task-augmented DATA_WRITE_SQL, by kind. */
async function sendAsTask(c: Client, sql: string, callId?: string): Promise<Message[]> {
  const out: Message[] = [];
  const request = { name: 'DATA_WRITE_SQL', arguments: { sql }, ...(callId ? { _meta: { 'agentdb/callId': callId } } : {}) };
  for await (const m of c.experimental.tasks.callToolStream(request, CallToolResultSchema)) {
    if (m.type === 'taskCreated') out.push({ type: m.type, taskId: m.task.taskId });
    else if (m.type === 'error') out.push({ type: m.type, text: m.error.message });
    else if (m.type === 'result') out.push({ type: m.type, result: m.result as Message['result'] });
    else out.push({ type: m.type });
  }
  return out;
}

describe('an MCP task, by the registry rule of /v1/calls', () => {
  it('is not made for IDEMPOTENCY_CONFLICT (a refusal of the request): the first call keeps its own task', async () => {
    const c = await connect('idem');
    expect((await sendAsTask(c, 'CREATE TABLE t (v)')).at(-1)).toMatchObject({ type: 'result', result: { isError: false } });
    const first = await sendAsTask(c, 'INSERT INTO t VALUES (1)', 'h6-1');
    const taskId = first[0]!.taskId!;
    expect(first.at(-1)).toMatchObject({ type: 'result', result: { isError: false } });

    // Another call under the same id: refused at once, no task.
    expect(await sendAsTask(c, 'INSERT INTO t VALUES (2)', 'h6-1')).toEqual([{ type: 'error', text: expect.stringContaining('IDEMPOTENCY_CONFLICT') }]);
    // The first call's task still stands, and still answers the first call's outcome.
    expect(await c.experimental.tasks.getTask(taskId)).toMatchObject({ taskId, status: 'completed' });
    const result = (await c.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)) as Message['result'];
    expect(result).toMatchObject({ isError: false, structuredContent: { callId: 'h6-1', changes: 1 } });
  });

  it("is made for the disk quota's QUOTA_EXCEEDED (a call taken, whose outcome /v1 answers as a 200 envelope)", async () => {
    const c = await connect('fat');
    for (const sql of ['CREATE TABLE t (b BLOB)', 'INSERT INTO t SELECT randomblob(1200000)'])
      expect((await sendAsTask(c, sql)).at(-1)).toMatchObject({ type: 'result', result: { isError: false } });
    const refused = await sendAsTask(c, 'INSERT INTO t VALUES (1)');
    // A task, failed (the SDK's stream ends a failed task with an error naming it), whose result is the refusal.
    expect(refused.map((m) => m.type)).toEqual(['taskCreated', 'taskStatus', 'error']);
    const result = (await c.experimental.tasks.getTaskResult(refused[0]!.taskId!, CallToolResultSchema)) as Message['result'];
    expect(result).toMatchObject({ isError: true, structuredContent: { error: { code: 'QUOTA_EXCEEDED' } } });
    expect((result!.structuredContent!.error as Record<string, unknown>).retryAfter).toBeUndefined();
  });
});
