import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { DEFAULT_REQUEST_TIMEOUT_MSEC } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { CallToolResultSchema, CreateTaskResultSchema, ErrorCode, type Task } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Issue 28 part 2: a write parked for a person reached MCP clients as -32001 (the wait equalled
// the SDK's 60 s request timeout), and each retry made a second approval. Now a client that asks
// for a task gets one, readable from any instance; the others get the pending answer well inside
// their timeout, and sending the same write again joins the waiting call.

let sb: Sandbox;
/** The instance a client talks to, with the sandbox's wait (MCP_APPROVAL_WAIT_MS, set below). */
let k: KeyedApp;
/** Another instance over the same Redis. */
let other: KeyedApp;
let base: string;
let otherBase: string;
const key: Record<string, string> = {};
const clients: Client[] = [];

beforeAll(async () => {
  // Shorter than the default 25 s (checked against the SDK's timeout below), which the first
  // test would spend in full waiting for the pending answer; long enough that a resend is still
  // waiting when the test decides.
  sb = sandbox({ MCP_APPROVAL_WAIT_MS: '5000' });
  await sb.pool();
  k = keyedApp(sb, { approvalWaitMs: sb.config.mcpApprovalWaitMs });
  other = keyedApp(sb);
  // The table every test writes into, made before the agent's writes wait for a person.
  key.careful = await k.agentKey('acme', 'careful', { displayName: 'Careful', settings: { database: 'agent' } });
  key.nosy = await k.agentKey('acme', 'nosy', { displayName: 'Nosy', settings: { database: 'agent' } });
  key.bob = await k.memberKey('acme', 'bob', 'member');
  key.gated = await k.agentKey('acme', 'gated', {
    displayName: 'Gated',
    settings: { database: 'agent' },
    surface: { kind: 'db', mode: 'write', policy: 'require-approval' },
  });
  const table = {
    workspace: 'acme',
    agent: 'gated',
    settings: { database: 'agent' as const },
    tool: 'DATA_WRITE_SQL',
    arguments: { sql: 'CREATE TABLE g (x)' },
  };
  expect(await k.client.call(table)).toMatchObject({ ok: true });
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  otherBase = await other.app.listen({ port: 0, host: '127.0.0.1' });
  expect(await call(await connect(key.careful!), 'DATA_WRITE_SQL', { sql: 'CREATE TABLE j (x)' })).toMatchObject({ isError: false });
  key.careful = await k.agentKey('acme', 'careful', { displayName: 'Careful', settings: { database: 'agent', approval: 'write' } });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await other.close();
  await k.close();
  await sb.cleanup();
});

async function connect(bearer: string, opts: { at?: string; tasks?: boolean } = {}): Promise<Client> {
  const client = new Client({ name: 'agentdb-test', version: '1.0.0' }, opts.tasks ? { capabilities: { tasks: {} } } : {});
  await client.connect(
    new StreamableHTTPClientTransport(new URL('/mcp', opts.at ?? base), { requestInit: { headers: { authorization: `Bearer ${bearer}` } } }),
  );
  clients.push(client);
  return client;
}

type Result = { content: { type: string; text: string }[]; structuredContent?: Record<string, unknown>; isError?: boolean };
const call = async (c: Client, name: string, args: Record<string, unknown>) => (await c.callTool({ name, arguments: args })) as Result;

async function rowCount(): Promise<number> {
  const r = await call(await connect(key.careful!), 'DATA_QUERY_SQL', { sql: 'SELECT count(*) AS n FROM j' });
  return (r.structuredContent!.rows as number[][])[0]![0]!;
}

async function pendingApprovals(agent: string): Promise<string[]> {
  return (await k.approvals.list({ state: 'pending', workspace: 'acme' })).filter((a) => a.agent === agent).map((a) => a.id);
}

/** The one approval `agent` waits on, once it is there; fails if there are two. */
async function onlyPendingApproval(agent: string): Promise<string> {
  await expect.poll(() => pendingApprovals(agent), { timeout: 10_000 }).toHaveLength(1);
  return (await pendingApprovals(agent))[0]!;
}

async function decide(id: string, decision: 'approve' | 'reject'): Promise<void> {
  expect(await k.client.decide(id, { decision, key: key.bob! })).toMatchObject({ ok: true });
}

describe('a write that waits for a person, over MCP', () => {
  it('reaches a client without tasks as a pending answer within its request timeout, naming the approval and how to get the outcome', async () => {
    // The default wait well inside the SDK client's own default timeout.
    expect(loadConfig({}).mcpApprovalWaitMs).toBeLessThan(DEFAULT_REQUEST_TIMEOUT_MSEC / 2);
    const c = await connect(key.careful!);
    // The SDK client's own default timeout: a -32001 would reject here.
    const pending = await call(c, 'DATA_WRITE_SQL', { sql: 'INSERT INTO j VALUES (1)' });
    expect(pending.isError).toBeFalsy();
    expect(pending.structuredContent).toMatchObject({ status: 'awaiting_approval', approval: { id: expect.any(String) } });
    // What it would change goes with it (issue 29): one row inserted into j.
    expect(pending.structuredContent).toMatchObject({ approval: { effect: { tables: [{ table: 'j', inserted: 1, updated: 0, deleted: 0 }] } } });
    const approval = (pending.structuredContent!.approval as { id: string }).id;
    const text = pending.content[0]!.text;
    expect(text).toContain(`approval ${approval}`);
    expect(text).toContain('Send this same call again (same tool and arguments) to get its outcome');
    expect(pending.structuredContent!.resend).toEqual(expect.stringContaining('Send this same call again'));

    // Sent again while it waits: it joins the call; no second approval.
    const resend = call(await connect(key.careful!), 'DATA_WRITE_SQL', { sql: 'INSERT INTO j VALUES (1)' });
    expect(await onlyPendingApproval('careful')).toBe(approval);
    await decide(approval, 'approve');
    const outcome = await resend;
    expect(outcome).toMatchObject({ isError: false, structuredContent: { callId: pending.structuredContent!.callId, changes: 1 } });
    expect(await rowCount()).toBe(1);

    // Its outcome given, the same write is a new one: a new approval, and it runs again.
    const again = call(c, 'DATA_WRITE_SQL', { sql: 'INSERT INTO j VALUES (1)' });
    const second = await onlyPendingApproval('careful');
    expect(second).not.toBe(approval);
    await decide(second, 'approve');
    expect(await again).toMatchObject({ isError: false, structuredContent: { changes: 1 } });
    expect((await again).structuredContent!.callId).not.toBe(pending.structuredContent!.callId);
    expect(await rowCount()).toBe(2);
  });

  it('a client that gives up sooner than the wait (its own timeout) and sends the call again joins the call it left', async () => {
    const c = await connect(key.careful!);
    const args = { name: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO j VALUES (5)' } };
    await expect(c.callTool(args, CallToolResultSchema, { timeout: 300 })).rejects.toThrow(/timed out/i);
    const approval = await onlyPendingApproval('careful');
    const resend = c.callTool(args) as Promise<Result>;
    expect(await pendingApprovals('careful')).toEqual([approval]);
    await decide(approval, 'approve');
    expect(await resend).toMatchObject({ isError: false, structuredContent: { changes: 1 } });
    expect(await pendingApprovals('careful')).toEqual([]);
  });

  it('a resend after the decision, before anyone was given the outcome, answers that outcome without running again', async () => {
    const short = keyedApp(sb, { approvalWaitMs: 100 });
    try {
      const at = await short.app.listen({ port: 0, host: '127.0.0.1' });
      const c = await connect(key.careful!, { at });
      const before = await rowCount();
      const pending = await call(c, 'DATA_WRITE_SQL', { sql: 'INSERT INTO j VALUES (?)', params: [7] });
      expect(pending.structuredContent).toMatchObject({ status: 'awaiting_approval' });
      await decide(await onlyPendingApproval('careful'), 'reject');
      const outcome = await call(c, 'DATA_WRITE_SQL', { sql: 'INSERT INTO j VALUES (?)', params: [7] });
      expect(outcome).toMatchObject({ isError: true, structuredContent: { callId: pending.structuredContent!.callId, error: { code: 'APPROVAL_REJECTED' } } });
      expect(await pendingApprovals('careful')).toEqual([]);
      expect(await rowCount()).toBe(before);
      // Another write (other params) is never joined to it.
      const another = await call(c, 'DATA_WRITE_SQL', { sql: 'INSERT INTO j VALUES (?)', params: [8] });
      expect(another.structuredContent!.callId).not.toBe(pending.structuredContent!.callId);
      await decide(await onlyPendingApproval('careful'), 'reject');
    } finally {
      await short.close();
    }
  });

  it('reaches a client with tasks as a task, working until decided and run, readable from another instance and by nobody else', async () => {
    const c = await connect(key.careful!, { tasks: true });
    const { tools } = await c.listTools();
    expect(tools.find((t) => t.name === 'DATA_WRITE_SQL')!.execution).toEqual({ taskSupport: 'optional' });
    expect(tools.find((t) => t.name === 'DATA_QUERY_SQL')!.execution).toBeUndefined();

    const before = await rowCount();
    const stream = c.experimental.tasks.callToolStream({ name: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO j VALUES (2)' } }, CallToolResultSchema);
    const first = await stream.next();
    expect(first.value).toMatchObject({ type: 'taskCreated', task: { status: 'working' } });
    const task = (first.value as { task: Task }).task;
    expect(task.ttl).toBe(sb.config.approvalTtlMs + sb.config.resultTtlS * 1000);
    const approval = await onlyPendingApproval('careful');

    // Another instance knows the task (it is in Redis, not in the server that made it).
    const elsewhere = await connect(key.careful!, { at: otherBase, tasks: true });
    const seen = await elsewhere.experimental.tasks.getTask(task.taskId);
    expect(seen).toMatchObject({ taskId: task.taskId, status: 'working' });
    expect(seen.statusMessage).toContain(`approval ${approval}`);
    const pttl = await k.redis.pttl(keysFor(sb.config.prefix).mcpTask(task.taskId));
    expect(pttl).toBeGreaterThan(0);
    // Counted in the workspace's Redis budget.
    const ledger = await k.redis.zrange(keysFor(sb.config.prefix).redisBudget('acme').ledger, 0, -1);
    expect(ledger.some((m) => m.startsWith(`mcp-task:${task.taskId}|task:`))).toBe(true);
    // Another agent of the workspace, and a member, find no such task.
    for (const stranger of [key.nosy!, key.bob!]) {
      const s = await connect(stranger, { at: otherBase, tasks: true });
      await expect(s.experimental.tasks.getTask(task.taskId)).rejects.toThrow(/not found/i);
      await expect(s.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)).rejects.toThrow(/not found/i);
    }

    // tasks/result waits for the call to end, on any instance; one whose server stops answers at once.
    const blocked = elsewhere.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    const stopping = keyedApp(sb);
    try {
      const at = await stopping.app.listen({ port: 0, host: '127.0.0.1' });
      const waiting = (await connect(key.careful!, { at, tasks: true })).experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
      stopping.calls.stopWaiting();
      await expect(waiting).rejects.toThrow(/ask for the task result again/);
    } finally {
      await stopping.close();
    }

    await decide(approval, 'approve');
    expect(await blocked).toMatchObject({ isError: false, structuredContent: { changes: 1 } });
    let result: Result | undefined;
    for await (const m of stream) {
      expect(m.type).not.toBe('error');
      if (m.type === 'result') result = m.result as Result;
    }
    expect(result).toMatchObject({ isError: false, structuredContent: { changes: 1 } });
    expect(await rowCount()).toBe(before + 1);
    // The other instance gives the same result, and the task says completed.
    expect(await elsewhere.experimental.tasks.getTask(task.taskId)).toMatchObject({ status: 'completed' });
    expect(await elsewhere.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)).toMatchObject({ structuredContent: result!.structuredContent });
  });

  it('a rejected task fails with the refusal as its result; a call that needs nobody is a task already completed', async () => {
    const c = await connect(key.careful!, { tasks: true });
    await c.listTools();
    const stream = c.experimental.tasks.callToolStream({ name: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO j VALUES (3)' } }, CallToolResultSchema);
    const created = (await stream.next()).value as { task: Task };
    await decide(await onlyPendingApproval('careful'), 'reject');
    const messages = [];
    for await (const m of stream) messages.push(m);
    expect(messages.at(-1)).toMatchObject({ type: 'error' });
    expect(await c.experimental.tasks.getTask(created.task.taskId)).toMatchObject({ status: 'failed' });
    expect(await c.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema)).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'APPROVAL_REJECTED' } },
    });

    // An agent without approvals: its write runs at once, and its task is completed when made.
    const free = await connect(key.nosy!, { tasks: true });
    await free.listTools();
    const kinds = [];
    for await (const m of free.experimental.tasks.callToolStream({ name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE n (x)' } }, CallToolResultSchema)) {
      kinds.push(m.type === 'taskCreated' || m.type === 'taskStatus' ? `${m.type}:${m.task.status}` : m.type);
    }
    expect(kinds).toEqual(['taskCreated:completed', 'taskStatus:completed', 'result']);
  });

  it('a tool listed without taskSupport, called as a task, is refused with -32601 and keeps no task', async () => {
    const c = await connect(key.nosy!, { tasks: true });
    await c.listTools();
    const before = (await c.experimental.tasks.listTasks()).tasks.length;
    // The SDK asks for a task only for a tool marked taskSupport: a client that asks anyway.
    for (const [name, args] of [
      ['DATA_QUERY_SQL', { sql: 'SELECT 1 AS one' }],
      ['DATA_DESCRIBE_SCHEMA', {}],
    ] as const) {
      const asked = c.request({ method: 'tools/call', params: { name, arguments: args, task: {} } }, CreateTaskResultSchema);
      await expect(asked, name).rejects.toMatchObject({ code: ErrorCode.MethodNotFound });
    }
    expect((await c.experimental.tasks.listTasks()).tasks.length).toBe(before);
    // Without params.task the same read answers as ever.
    expect(await call(c, 'DATA_QUERY_SQL', { sql: 'SELECT 1 AS one' })).toMatchObject({ isError: false, structuredContent: { rows: [[1]] } });
  });

  it('a task sent again while its call waits joins it: one approval, and both tasks end with the one run', async () => {
    const c = await connect(key.careful!, { tasks: true });
    await c.listTools();
    const before = await rowCount();
    const args = { name: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO j VALUES (4)' } };
    const first = c.experimental.tasks.callToolStream(args, CallToolResultSchema);
    const a = ((await first.next()).value as { task: Task }).task;
    const approval = await onlyPendingApproval('careful');
    const otherClient = await connect(key.careful!, { tasks: true, at: otherBase });
    await otherClient.listTools();
    const again = otherClient.experimental.tasks;
    const second = await again.callToolStream(args, CallToolResultSchema).next();
    const b = (second.value as { task: Task }).task;
    expect(b).toMatchObject({ status: 'working' });
    // The call's one task (session 30, T7: a task a send, each kept 48 h, let a resend past the
    // budget grow Redis by its result a send).
    expect(b.taskId).toBe(a.taskId);
    expect(await pendingApprovals('careful')).toEqual([approval]);
    await decide(approval, 'approve');
    const results = [];
    for await (const m of first) if (m.type === 'result') results.push(m.result);
    results.push(await again.getTaskResult(b.taskId, CallToolResultSchema));
    expect(results).toHaveLength(2);
    expect(results[1]!.structuredContent).toEqual(results[0]!.structuredContent);
    expect(await rowCount()).toBe(before + 1);
  });

  it("db_exec's require-approval answer at once is joined by the same statement sent again, which answers the outcome once decided", async () => {
    const c = await connect(key.gated!);
    const args = { statement: 'INSERT INTO g VALUES (1)', rationale: 'joined' };
    const first = await call(c, 'db_exec', args);
    expect(first).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'APPROVAL_REQUIRED' }, resend: expect.stringContaining('Send this same call again') },
    });
    const again = await call(c, 'db_exec', args);
    expect(again).toMatchObject({ structuredContent: { callId: first.structuredContent!.callId, error: { code: 'APPROVAL_REQUIRED' } } });
    await decide(await onlyPendingApproval('gated'), 'approve');
    const outcome = await call(c, 'db_exec', args);
    expect(outcome).toMatchObject({ isError: false, structuredContent: { callId: first.structuredContent!.callId, changes: 1 } });
    // Its outcome given, the same statement is a new call: it asks for a new approval.
    const fresh = await call(c, 'db_exec', args);
    expect(fresh.structuredContent!.callId).not.toBe(first.structuredContent!.callId);
    await decide(await onlyPendingApproval('gated'), 'reject');
  });

  it('a waiting task stays working while others spend the lookup rate limit, completes once approved, and a resend joins it', async () => {
    // Lookups and calls share the workspace's rate points: others spend them all on lookups.
    const lim = keyedApp(sb, { rateLimits: { windowS: 600, workspaceCalls: 5 } });
    try {
      const at = await lim.app.listen({ port: 0, host: '127.0.0.1' });
      const c = await connect(key.careful!, { at, tasks: true });
      await c.listTools();
      const before = await rowCount();
      const args = { name: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO j VALUES (9)' } };
      const task = ((await c.experimental.tasks.callToolStream(args, CallToolResultSchema).next()).value as { task: Task }).task;
      expect(task).toMatchObject({ status: 'working' });
      const approval = await onlyPendingApproval('careful');
      let code: string | undefined;
      for (let i = 0; i < 200 && code !== 'RATE_LIMITED'; i++) {
        const a = await lim.client.result(`nope-${i}`, { workspace: 'acme', agent: 'nosy' });
        code = 'error' in a ? a.error.code : undefined;
      }
      expect(code).toBe('RATE_LIMITED');
      // The task's own look at its call is not the caller's lookup: still working, not failed.
      expect(await c.experimental.tasks.getTask(task.taskId)).toMatchObject({ status: 'working' });
      // The same write sent again (on an instance without limits) joins the waiting call.
      const resend = call(await connect(key.careful!), args.name, args.arguments);
      expect(await onlyPendingApproval('careful')).toBe(approval);
      await decide(approval, 'approve');
      expect(await c.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)).toMatchObject({ isError: false, structuredContent: { changes: 1 } });
      expect(await resend).toMatchObject({ isError: false, structuredContent: { changes: 1 } });
      expect(await c.experimental.tasks.getTask(task.taskId)).toMatchObject({ status: 'completed' });
      expect(await rowCount()).toBe(before + 1);
    } finally {
      await lim.close();
    }
  });

  it('five identical sends at the same moment make one call and one approval', async () => {
    // Long enough for the call to park under a loaded machine: at 100 ms one send (load 20)
    // answered `running`, true but not what this test looks at (one call, one approval).
    const short = keyedApp(sb, { approvalWaitMs: 3000 });
    try {
      const at = await short.app.listen({ port: 0, host: '127.0.0.1' });
      const before = await rowCount();
      const sends = await Promise.all(Array.from({ length: 5 }, () => connect(key.careful!, { at })));
      const answers = await Promise.all(sends.map((c) => call(c, 'DATA_WRITE_SQL', { sql: 'INSERT INTO j VALUES (?)', params: [55] })));
      const callIds = new Set(answers.map((a) => a.structuredContent!.callId));
      expect(callIds.size).toBe(1);
      expect(answers.map((a) => a.structuredContent!.status)).toEqual(Array(5).fill('awaiting_approval'));
      await decide(await onlyPendingApproval('careful'), 'approve');
      const outcome = await call(sends[0]!, 'DATA_WRITE_SQL', { sql: 'INSERT INTO j VALUES (?)', params: [55] });
      expect(outcome).toMatchObject({ isError: false, structuredContent: { changes: 1 } });
      expect(await pendingApprovals('careful')).toEqual([]);
      expect(await rowCount()).toBe(before + 1);
    } finally {
      await short.close();
    }
  });
});
