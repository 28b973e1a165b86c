import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ErrorCode, type Task } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TASK_LIST_PAGE } from '../../src/mcp/task-store.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Issue 28, the leftovers: tasks/list shows a principal its own tasks only, paged with the
// spec's cursor; tasks/cancel ends a working task for good (cancelled), leaving the approval its
// call waits on for a person, and the call's resend still joins it. Through the SDK client over
// HTTP, two instances on one Redis.

let sb: Sandbox;
let k: KeyedApp;
let other: KeyedApp;
let base: string;
let otherBase: string;
const key: Record<string, string> = {};
const clients: Client[] = [];

beforeAll(async () => {
  sb = sandbox();
  await sb.pool();
  k = keyedApp(sb);
  other = keyedApp(sb);
  key.careful = await k.agentKey('acme', 'careful', { displayName: 'Careful', settings: { database: 'agent' } });
  key.free = await k.agentKey('acme', 'free', { displayName: 'Free', settings: { database: 'agent' } });
  key.nosy = await k.agentKey('acme', 'nosy', { displayName: 'Nosy', settings: { database: 'agent' } });
  key.bob = await k.memberKey('acme', 'bob', 'member');
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  otherBase = await other.app.listen({ port: 0, host: '127.0.0.1' });
  const setup = await connect(key.careful);
  expect(await setup.callTool({ name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE j (x)' } })).toMatchObject({ isError: false });
  expect(await (await connect(key.free)).callTool({ name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE f (x)' } })).toMatchObject({ isError: false });
  // From here on every write of careful's waits for a person.
  key.careful = await k.agentKey('acme', 'careful', { displayName: 'Careful', settings: { database: 'agent', approval: 'write' } });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await other.close();
  await k.close();
  await sb.cleanup();
});

async function connect(bearer: string | undefined, at = base): Promise<Client> {
  const client = new Client({ name: 'agentdb-test', version: '1.0.0' }, { capabilities: { tasks: {} } });
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', at), { requestInit: { headers: { authorization: `Bearer ${bearer}` } } }));
  clients.push(client);
  return client;
}

/** Sends a write as a task and answers the task it made (the stream left there). */
async function taskOf(c: Client, sql: string): Promise<Task> {
  const stream = c.experimental.tasks.callToolStream({ name: 'DATA_WRITE_SQL', arguments: { sql } }, CallToolResultSchema);
  const first = await stream.next();
  expect(first.value).toMatchObject({ type: 'taskCreated' });
  return (first.value as { task: Task }).task;
}

async function pendingApprovals(agent: string): Promise<string[]> {
  return (await k.approvals.list({ state: 'pending', workspace: 'acme' })).filter((a) => a.agent === agent).map((a) => a.id);
}

async function onlyPendingApproval(agent: string): Promise<string> {
  await expect.poll(() => pendingApprovals(agent), { timeout: 10_000 }).toHaveLength(1);
  return (await pendingApprovals(agent))[0]!;
}

/** Rows in careful's table j (a read runs at once). */
async function rowsOfJ(): Promise<number> {
  const r = await (await connect(key.careful)).callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM j' } });
  return (r.structuredContent as { rows: number[][] }).rows[0]![0]!;
}

describe('tasks/list and tasks/cancel over MCP', () => {
  it('the server declares both', async () => {
    const c = await connect(key.free);
    expect(c.getServerCapabilities()?.tasks).toMatchObject({ list: {}, cancel: {}, requests: { tools: { call: {} } } });
  });

  it("lists the caller's own tasks, newest first, a page at a time with the cursor; nobody else's, and refuses a cursor it never gave", async () => {
    const c = await connect(key.free);
    await c.listTools();
    const made: string[] = [];
    for (let i = 0; i <= TASK_LIST_PAGE; i++) made.push((await taskOf(c, `INSERT INTO f VALUES (${i})`)).taskId);
    // Read from the other instance: the list is in Redis.
    const elsewhere = await connect(key.free, otherBase);
    const first = await elsewhere.experimental.tasks.listTasks();
    expect(first.tasks).toHaveLength(TASK_LIST_PAGE);
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = await elsewhere.experimental.tasks.listTasks(first.nextCursor);
    expect(second.nextCursor).toBeUndefined();
    const listed = [...first.tasks, ...second.tasks];
    expect(listed.map((t) => t.taskId)).toEqual([...made].reverse());
    expect(listed.every((t) => t.status === 'completed')).toBe(true);

    // Another agent of the workspace, and a member, list none of them.
    for (const stranger of [key.nosy, key.bob]) expect((await (await connect(stranger)).experimental.tasks.listTasks()).tasks).toEqual([]);
    await expect(elsewhere.experimental.tasks.listTasks('not-a-cursor')).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
  });

  it('cancels a waiting task for good; its approval stays for a person, and the same call sent again joins the call and gets its outcome', async () => {
    const c = await connect(key.careful);
    await c.listTools();
    const before = await rowsOfJ();
    const task = await taskOf(c, 'INSERT INTO j VALUES (1)');
    expect(task.status).toBe('working');
    const approval = await onlyPendingApproval('careful');

    // Nobody else may cancel it: the same answer as a task that does not exist.
    for (const stranger of [key.nosy, key.bob]) {
      await expect((await connect(stranger)).experimental.tasks.cancelTask(task.taskId)).rejects.toThrow(/not found/i);
    }
    expect(await c.experimental.tasks.getTask(task.taskId)).toMatchObject({ status: 'working' });

    const cancelled = await (await connect(key.careful, otherBase)).experimental.tasks.cancelTask(task.taskId);
    expect(cancelled).toMatchObject({ taskId: task.taskId, status: 'cancelled' });
    expect(cancelled.statusMessage).toContain(`approval ${approval}`);
    expect(cancelled.statusMessage).toContain('send the same call again');
    // The approval is left for a person.
    expect(await pendingApprovals('careful')).toEqual([approval]);
    await expect(c.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)).rejects.toThrow(/was cancelled/);
    await expect(c.experimental.tasks.cancelTask(task.taskId)).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
    expect((await c.experimental.tasks.listTasks()).tasks.find((t) => t.taskId === task.taskId)).toMatchObject({ status: 'cancelled' });

    // Sent again (no task this time): it joins the waiting call, no second approval, and answers once decided.
    const resend = c.callTool({ name: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO j VALUES (1)' } });
    expect(await k.client.decide(approval, { decision: 'approve', key: key.bob! })).toMatchObject({ ok: true });
    expect(await resend).toMatchObject({ isError: false, structuredContent: { changes: 1 } });
    expect(await pendingApprovals('careful')).toEqual([]);
    expect(await rowsOfJ()).toBe(before + 1);
    // The call ran; the task stays cancelled.
    expect(await c.experimental.tasks.getTask(task.taskId)).toMatchObject({ status: 'cancelled' });
  });

  it('a task already ended cannot be cancelled', async () => {
    const c = await connect(key.free);
    await c.listTools();
    const done = await taskOf(c, 'INSERT INTO f VALUES (100)');
    expect(done.status).toBe('completed');
    await expect(c.experimental.tasks.cancelTask(done.taskId)).rejects.toMatchObject({
      code: ErrorCode.InvalidParams,
      message: expect.stringMatching(/terminal/),
    });
    expect(await c.experimental.tasks.getTask(done.taskId)).toMatchObject({ status: 'completed' });
  });
});
